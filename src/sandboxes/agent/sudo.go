package main

// E2B's templates let their user run `sudo` without a password. Root here is the sandbox's own
// (rootInside), and no setuid program can reach it: every mount is nosuid and no process may
// gain privileges. So `sudo` asks the agent: this program, run under the name sudo (the host
// binds it at /usr/local/bin/sudo: isolation/bubblewrap/bwrap-argv.ts), sends its command line,
// environment and directory with its three stdio descriptors over the agent's unix socket
// (sudoSocket); the agent starts the command as root on those descriptors, passes on the signals
// sudo receives, and answers the command's exit status. Any process of the sandbox may ask, as
// any may on E2B: the sandbox is the boundary, not its user.

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const sudoSocket = "/run/agent-runner-sudo.sock"

// sudoRequestMax bounds one request: a command line and an environment well within exec's.
const sudoRequestMax = 1 << 20

// securePath is Debian's sudoers secure_path: root's commands are looked up there.
const securePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// listenSudo opens the socket sudo asks on; with no root inside there is none (sudo says so).
func (a *agent) listenSudo() {
	if !rootInside {
		return
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	_ = syscall.Unlink(sudoSocket)
	if syscall.Bind(fd, &syscall.SockaddrUnix{Name: sudoSocket}) != nil || syscall.Chmod(sudoSocket, 0o666) != nil || syscall.Listen(fd, 16) != nil {
		syscall.Close(fd)
		return
	}
	a.setReader(fd, func() { a.acceptSudo(fd) })
}

func (a *agent) acceptSudo(listener int) {
	conn, _, err := syscall.Accept4(listener, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
	if err != nil {
		return
	}
	a.setReader(conn, func() { a.readSudo(conn) })
}

// readSudo takes a request (the first message: NUL-separated fields, its descriptors beside
// it), then signal numbers to pass on to the command, one byte each.
func (a *agent) readSudo(conn int) {
	pid, asked := a.sudoPids[conn]
	// A request's room only for the request: what follows it is signal numbers.
	size := sudoRequestMax
	if asked {
		size = 64
	}
	buffer := make([]byte, size)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	n, oobn, _, _, err := syscall.Recvmsg(conn, buffer, oob, syscall.MSG_CMSG_CLOEXEC)
	if err != nil && isErrno(err, syscall.EAGAIN) {
		return
	}
	if asked {
		if err != nil || n == 0 {
			a.dropReader(conn) // sudo is gone; its command runs on, its end reported to no one
			delete(a.sudoPids, conn)
			delete(a.sudoConns, pid)
			syscall.Close(conn)
			return
		}
		for _, number := range buffer[:n] {
			_ = syscall.Kill(pid, syscall.Signal(number))
		}
		return
	}
	fds := receivedFds(oob[:oobn])
	pid, failure := a.startForSudo(buffer[:n], fds, err)
	for _, fd := range fds {
		syscall.Close(fd)
	}
	if failure != nil {
		answerSudo(conn, 1, failure.Error())
		a.dropReader(conn)
		syscall.Close(conn)
		return
	}
	a.sudoPids[conn], a.sudoConns[pid] = pid, conn
}

func receivedFds(oob []byte) []int {
	var fds []int
	messages, _ := syscall.ParseSocketControlMessage(oob)
	for _, message := range messages {
		if rights, err := syscall.ParseUnixRights(&message); err == nil {
			fds = append(fds, rights...)
		}
	}
	return fds
}

func (a *agent) startForSudo(request []byte, fds []int, received error) (int, error) {
	if received != nil {
		return 0, received
	}
	fields := strings.Split(string(request), "\x00")
	// cwd, argc, argv..., then the environment's entries
	if len(fds) != 3 || len(fields) < 3 {
		return 0, fmt.Errorf("a request without its command or its three descriptors")
	}
	var argc int
	if _, err := fmt.Sscan(fields[1], &argc); err != nil || argc < 1 || 2+argc > len(fields) {
		return 0, fmt.Errorf("a request without its command")
	}
	argv := fields[2 : 2+argc]
	env := newObject()
	for _, entry := range fields[2+argc:] {
		if key, value, ok := strings.Cut(entry, "="); ok {
			env.set(key, value)
		}
	}
	stdio := []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])}
	// In sudo's own session and process group: a terminal's signals reach sudo, which passes them on.
	return spawn(argv, env, fields[0], stdio, false, false)
}

// sudoEnded answers the sudo that asked for pid, if one did, with its exit status.
func (a *agent) sudoEnded(pid int, status syscall.WaitStatus) {
	conn, asked := a.sudoConns[pid]
	if !asked {
		return
	}
	code := status.ExitStatus()
	if status.Signaled() {
		code = 128 + int(status.Signal())
	}
	answerSudo(conn, code, "")
	a.dropReader(conn)
	delete(a.sudoConns, pid)
	delete(a.sudoPids, conn)
	syscall.Close(conn)
}

// answerSudo: a 4-byte exit status, then what went wrong, if anything.
func answerSudo(conn, code int, message string) {
	answer := binary.BigEndian.AppendUint32(nil, uint32(code))
	_, _ = syscall.Write(conn, append(answer, message...))
}

// sudoMain is the program run as sudo: `sudo [-E] [-n] [-H] [-u root] [--] command [args]`,
// `sudo -i` or `sudo -s` for root's shell.
func sudoMain(args []string) int {
	keepEnv, shell, login := false, false, false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		option := args[0]
		args = args[1:]
		switch option {
		case "--":
		case "-E", "--preserve-env":
			keepEnv = true
		case "-n", "--non-interactive", "-H", "--set-home", "-S", "--stdin", "-k", "--reset-timestamp":
		case "-i", "--login":
			shell, login = true, true
		case "-s", "--shell":
			shell = true
		case "-u", "--user":
			if len(args) == 0 || (args[0] != "root" && args[0] != "#0") {
				return sudoFailed("only root is there to run as")
			}
			args = args[1:]
		default:
			return sudoFailed("option " + option + " is not supported here")
		}
		if option == "--" {
			break
		}
	}
	if len(args) == 0 && !shell {
		fmt.Fprintln(os.Stderr, "usage: sudo [-E] [-n] [-u root] command [args], sudo -i, sudo -s")
		return 1
	}
	argv := args
	if shell {
		argv = []string{"/bin/bash"}
		if login {
			argv = append(argv, "-l")
		}
		if len(args) > 0 {
			argv = append(argv, "-c", strings.Join(args, " "))
		}
	}
	cwd, err := os.Getwd()
	if err != nil || login {
		cwd = "/root"
	}
	fields := append([]string{cwd, fmt.Sprint(len(argv))}, argv...)
	fields = append(fields, sudoEnvironment(keepEnv, argv)...)
	return askAgent(strings.Join(fields, "\x00"))
}

// sudoEnvironment is sudo's: root's own with what a terminal needs, or (-E) the caller's, and
// what sudo adds either way.
func sudoEnvironment(keep bool, argv []string) []string {
	var env []string
	if keep {
		env = os.Environ()
	} else {
		env = []string{"PATH=" + securePath, "HOME=/root", "USER=root", "LOGNAME=root", "SHELL=/bin/bash"}
		for _, name := range []string{"TERM", "LANG", "LC_ALL", "COLORTERM", "DISPLAY"} {
			if value, ok := os.LookupEnv(name); ok {
				env = append(env, name+"="+value)
			}
		}
	}
	return append(env, "SUDO_USER=user", "SUDO_UID=1000", "SUDO_GID=1000", "SUDO_COMMAND="+strings.Join(argv, " "))
}

func askAgent(request string) int {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err == nil {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: sudoSocket})
	}
	if err == nil {
		err = syscall.Sendmsg(fd, []byte(request), syscall.UnixRights(0, 1, 2), nil, 0)
	}
	if err != nil {
		return sudoFailed("this sandbox has no root to run as (" + err.Error() + ")")
	}
	forwardSignals(fd)
	answer := make([]byte, 4096)
	n, err := syscall.Read(fd, answer)
	for err != nil && isErrno(err, syscall.EINTR) {
		n, err = syscall.Read(fd, answer)
	}
	if err != nil || n < 4 {
		return sudoFailed("the sandbox's agent gave no answer")
	}
	if n > 4 {
		return sudoFailed(string(answer[4:n]))
	}
	return int(binary.BigEndian.Uint32(answer[:4]))
}

// forwardSignals passes what would stop sudo on to its command, as sudo does.
func forwardSignals(fd int) {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for received := range signals {
			_, _ = syscall.Write(fd, []byte{byte(received.(syscall.Signal))})
		}
	}()
}

func sudoFailed(message string) int {
	fmt.Fprintln(os.Stderr, "sudo: "+message)
	return 1
}
