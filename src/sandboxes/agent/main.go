// The agent of a long-lived sandbox: its one long job, run inside the sandbox as the sandbox's
// user. It starts processes (pipes or a pseudo-terminal), feeds, signals and resizes them,
// reports their output and end, does file operations and watches directories, for the host
// (src/sandboxes/). A static program, so the same file serves every sandbox: the host's system,
// any image (with or without python, bash or glibc) and the microVM's guest. Its wire (requests,
// replies, events, codes and limits: contract/sandbox-agent.ts) was first spoken by a python
// agent, whose bytes it keeps where they were fixed (its JSON, its paths). Nothing here trusts the
// code it runs, which shares the sandbox: the protocol lives on private descriptors no child
// inherits, and the host checks every frame anyway.
//
// Who runs it: src/sandboxes/live-sandbox.ts, through the sandbox's backend, as the sandbox's
// first process and init (`/.agent-runner/sandbox-agent [root-inside]`: agent-program.ts). Its
// channel is its stdin and stdout, length-prefixed JSON frames (frames.go), which the host reads
// in src/sandboxes/agent-channel.ts. The same program has two other entries: `sudo` inside a
// sandbox with root inside (sudo.go), and `port-relay`, run by the host (relay.go).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

const (
	prSetDumpable       = 4
	prSetChildSubreaper = 36
)

func init() {
	// One thread does all the work: a file request may run with the user's ids, which the
	// raw calls of actingAs give only the thread that makes them.
	runtime.LockOSThread()
}

func main() {
	if basename(os.Args[0]) == "sudo" {
		os.Exit(sudoMain(os.Args[1:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "port-relay" {
		os.Exit(relayMain(os.Args[2:]))
	}
	// The processes the agent starts run as its uid: while the agent is dumpable they could
	// open /proc/<agent>/fd/N (its protocol pipes, to forge frames or steal requests) and
	// /proc/<agent>/mem. Not dumpable, its /proc entries are root's. Its children are dumpable
	// again once they exec, which is theirs to be.
	_ = prctl(prSetDumpable, 0)
	if rootInside {
		// the processes it starts as root belong to root's group alone
		if err := syscall.Setgroups([]int{}); err != nil {
			fmt.Fprintln(os.Stderr, "sandbox-agent: setgroups:", err)
			os.Exit(1)
		}
	}
	// The protocol moves to private descriptors, and fds 0-2 become /dev/null: nothing the
	// agent starts can write a frame or read a request. The agent's own failure, if any, still
	// reaches whatever stderr it was given.
	var private [3]int
	for fd := range private {
		copied, err := fcntl(fd, syscall.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sandbox-agent: dup:", err)
			os.Exit(1)
		}
		private[fd] = copied
	}
	protoIn, protoOut, diagnostics := private[0], private[1], private[2]
	// Nor anything else the agent was given: a descriptor its launcher left open (bwrap's
	// --userns-block-fd, a socket of the host's) is closed, so nothing it starts inherits it and
	// a checkpoint of the sandbox (CRIU) holds nothing of the host's but the protocol. The Go
	// runtime's own (its poller's anonymous inodes) stay, marked close-on-exec.
	if fd, err := syscall.Open("/proc/self/fd", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
		entries, _ := readDir(fd)
		for _, entry := range entries {
			var number int
			if _, err := fmt.Sscan(entry.name, &number); err != nil || number == fd || isProtocol(number, private) {
				continue
			}
			if target, err := readlinkat(fd, entry.name); err == nil && number > 2 && !strings.HasPrefix(target, "anon_inode:") {
				syscall.Close(number)
			} else {
				_, _ = fcntl(number, syscall.F_SETFD, syscall.FD_CLOEXEC)
			}
		}
		syscall.Close(fd)
	}
	if null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0); err == nil {
		for fd := 0; fd < 3; fd++ {
			_ = syscall.Dup3(null, fd, 0)
		}
		syscall.Close(null)
	}
	_ = syscall.SetNonblock(protoOut, false)
	// Whatever the processes it started leave behind is reparented to the agent, which reaps
	// it and can end it.
	_ = prctl(prSetChildSubreaper, 1)
	os.Exit(serve(protoIn, protoOut, diagnostics))
}

// serve runs the agent to its end: its exit status, 0 once the host is gone.
func serve(protoIn, protoOut, diagnostics int) (status int) {
	defer func() {
		switch failure := recover().(type) {
		case nil, hostGone:
		case interrupt:
			// python's end on SIGINT: a KeyboardInterrupt, then the signal's own death.
			fmt.Fprintln(os.NewFile(uintptr(diagnostics), "stderr"), "KeyboardInterrupt")
			signal.Reset(syscall.SIGINT)
			_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
			time.Sleep(time.Second)
			status = 130
		case fatal:
			fmt.Fprintln(os.NewFile(uintptr(diagnostics), "stderr"), "sandbox-agent:", failure.err)
			status = 1
		default:
			fmt.Fprintf(os.NewFile(uintptr(diagnostics), "stderr"), "sandbox-agent: %v\n%s", failure, debug.Stack())
			status = 1
		}
	}()
	newAgent(protoIn, protoOut).run()
	return 0
}

// isProtocol says whether fd is one of the agent's private protocol descriptors.
func isProtocol(fd int, private [3]int) bool {
	return fd == private[0] || fd == private[1] || fd == private[2]
}
