package main

// Processes and their lifecycle: start (pipes or a terminal, as the user or root), input within
// its window, signals, resize, output within the host's credit, their end and reaping; list, ping.

import (
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// One output event carries at most this much of a process's output, as read.
	outputChunk = 64 * 1024
	// Output of a process sent and not yet credited back by the host (`credit`), when its
	// start request names no window: past it the agent stops reading the process's pipes
	// until the host says its readers took what it holds.
	defaultOutputWindow = 256 * 1024
	// How long, after a process was reaped, its pipes are still read for output it left
	// there, when a process it started keeps them open.
	drainGrace = 100 * time.Millisecond
	// Then what they hold is read, up to this many chunks each (a full pipe is 16 of them).
	drainReads = 16
	// The kernel's highest signal (SIGRTMAX).
	lastSignal = 64
	// Input held for a process's stdin past which an `input` is answered only once the process
	// has read what is held down to this: the host waits for each answer before it sends more, so
	// a client that writes faster than the process reads is slowed, instead of the agent (the
	// sandbox's init, its memory the sandbox's) holding all it was sent.
	inputWindow = 1 << 20
)

type output struct {
	fd     int
	stream string
}

type process struct {
	pid    int
	config members
	pty    bool
	// connection: a TCP connection the agent made (opConnect), not a process: no pid of the
	// kernel's, nothing to wait for; it ends when the server closes its side.
	connection bool
	// outputs are the descriptors still read, each with its stream's name.
	outputs          []output
	stdin            int // -1: none
	pending          []byte
	closeWhenWritten bool
	// The ids of `input` requests not answered yet: their data is held past inputWindow.
	inputWaiting []number
	ended        bool
	status       syscall.WaitStatus
	deadline     time.Time
	draining     bool // deadline is set
	// Bytes of output the agent may still send before the host credits some back; at 0 or
	// below its outputs are not read, so its pipes fill and its writes block.
	window, credit int64
}

func (p *process) stream(fd int) string {
	for _, out := range p.outputs {
		if out.fd == fd {
			return out.stream
		}
	}
	return ""
}

func (a *agent) reap() {
	drain := make([]byte, 4096)
	for {
		if n, err := syscall.Read(a.wakeRead, drain); err != nil || n <= 0 {
			break
		}
	}
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err != nil || pid == 0 {
			return
		}
		p := a.processes[pid]
		if p == nil || p.ended {
			a.sudoEnded(pid, status) // or an orphan the agent adopted as subreaper
			continue
		}
		p.ended, p.status = true, status
		p.pending = nil
		a.answerInput(p)
		if p.stdin >= 0 && !p.pty {
			a.dropAll(p.stdin)
			syscall.Close(p.stdin)
		} else if p.stdin >= 0 {
			// A terminal's master is still read for its output: only its writing ends.
			a.dropWriter(p.stdin)
		}
		p.stdin = -1
		if len(p.outputs) > 0 {
			p.deadline, p.draining = time.Now().Add(drainGrace), true
		} else {
			a.finish(p)
		}
	}
}

func (a *agent) finish(p *process) {
	if len(p.outputs) > 0 || !p.ended || a.processes[p.pid] != p {
		return
	}
	delete(a.processes, p.pid)
	for i, other := range a.order {
		if other == p {
			a.order = append(a.order[:i], a.order[i+1:]...)
			break
		}
	}
	if p.status.Signaled() {
		number := int(p.status.Signal())
		a.send(members{{"event", "end"}, {"pid", p.pid}, {"exit_code", 128 + number}, {"signal", number}})
	} else {
		a.send(members{{"event", "end"}, {"pid", p.pid}, {"exit_code", p.status.ExitStatus()}, {"signal", nil}})
	}
}

func (a *agent) readOutput(p *process, fd int) {
	n, err := syscall.Read(fd, a.outputBuffer)
	if err == syscall.EAGAIN {
		return
	}
	// A terminal's master reads EIO once no one holds its other side.
	if err == nil && n > 0 {
		a.sendOutput(p, fd, a.outputBuffer[:n])
		return
	}
	a.closeOutput(p, fd)
	if p.connection {
		a.endConnection(p, 0)
		return
	}
	a.finish(p)
}

func (a *agent) sendOutput(p *process, fd int, data []byte) {
	p.credit -= int64(len(data))
	if p.credit <= 0 {
		for _, out := range p.outputs {
			a.dropReader(out.fd)
		}
	}
	a.sendFrame(outputFrame(p.pid, p.stream(fd), data))
}

// stopReading comes past the grace: what the pipes hold now is still reported (bounded, as a
// process that keeps them open may keep writing), then they are closed and the end reported.
// Without credit the rest waits for it (opCredit), and the end with it.
func (a *agent) stopReading(p *process) {
	for _, out := range append([]output{}, p.outputs...) {
		for i := 0; i < drainReads; i++ {
			if p.credit <= 0 {
				p.draining = false
				return
			}
			n, err := syscall.Read(out.fd, a.outputBuffer)
			if err != nil || n <= 0 {
				break
			}
			a.sendOutput(p, out.fd, a.outputBuffer[:n])
		}
		a.closeOutput(p, out.fd)
	}
	a.finish(p)
}

func (a *agent) closeOutput(p *process, fd int) {
	for i, out := range p.outputs {
		if out.fd == fd {
			p.outputs = append(p.outputs[:i], p.outputs[i+1:]...)
			break
		}
	}
	a.dropAll(fd)
	if p.stdin == fd {
		p.stdin = -1
		p.pending = nil
		a.answerInput(p)
	}
	syscall.Close(fd)
}

// answerInput answers the `input` requests held back (inputWindow) once what the process has
// not read is within the window again, or will never be read (its stdin gone: as a write to a
// closed pipe, the data is lost, which the process's end says).
func (a *agent) answerInput(p *process) {
	if len(p.pending) <= inputWindow {
		a.answerHeldInput(p)
	}
}

// answerHeldInput answers every `input` held back for the process, now.
func (a *agent) answerHeldInput(p *process) {
	for _, id := range p.inputWaiting {
		a.send(members{{"id", id}})
	}
	p.inputWaiting = nil
}

func (a *agent) writeInput(p *process) {
	fd := p.stdin
	for len(p.pending) > 0 {
		chunk := p.pending
		if len(chunk) > outputChunk {
			chunk = chunk[:outputChunk]
		}
		n, err := syscall.Write(fd, chunk)
		if err == syscall.EAGAIN {
			a.setWriter(fd, func() { a.writeInput(p) })
			a.answerInput(p)
			return
		}
		if err != nil {
			// The reader is gone (EPIPE): what was not written never will be.
			p.pending = nil
			if !p.pty {
				p.closeWhenWritten = true
			}
			break
		}
		p.pending = p.pending[n:]
	}
	a.dropWriter(fd)
	a.answerInput(p)
	if p.closeWhenWritten && !p.pty {
		if p.connection {
			// The host's end of input is the client's half-close, passed on to the server.
			_ = syscall.Shutdown(fd, syscall.SHUT_WR)
		}
		a.dropAll(fd)
		syscall.Close(fd)
		p.stdin = -1
	}
}

func (a *agent) runningProcess(r request) (*process, error) {
	pid, err := r.count("pid", 1, noMaximum)
	if err != nil {
		return nil, err
	}
	p := a.processes[int(pid.value)]
	if p == nil || p.ended {
		return nil, refuse("no_such_process", "no running process %s", pid.text)
	}
	return p, nil
}

func hasNUL(texts ...string) bool {
	for _, text := range texts {
		if strings.IndexByte(text, 0) >= 0 {
			return true
		}
	}
	return false
}

// environment is the agent's own environment as python's os.environ holds it: the first of a
// name given twice, nothing without an "=".
func environment() *object {
	env := newObject()
	for _, entry := range os.Environ() {
		name, value, ok := strings.Cut(entry, "=")
		if _, seen := env.get(name); ok && !seen {
			env.set(name, value)
		}
	}
	return env
}

// outputWindowOf is the output a request's process (or connection) may send before the host
// credits some back: its output_window, or defaultOutputWindow.
func outputWindowOf(r request) (int64, error) {
	if _, given := r.get("output_window"); !given {
		return defaultOutputWindow, nil
	}
	value, err := r.count("output_window", 1, noMaximum)
	return value.value, err
}

func opStart(a *agent, r request) (members, error) {
	cmd, err := r.text("cmd")
	if err != nil {
		return nil, err
	}
	args, err := r.list("args")
	if err != nil {
		return nil, err
	}
	envs, err := r.dict("envs", false)
	if err != nil {
		return nil, err
	}
	cwd, hasCwd, err := r.optionalText("cwd")
	if err != nil {
		return nil, err
	}
	tag, hasTag, err := r.optionalText("tag")
	if err != nil {
		return nil, err
	}
	size, err := r.dict("pty", true)
	if err != nil {
		return nil, err
	}
	keepStdin, err := r.boolean("stdin")
	if err != nil {
		return nil, err
	}
	window, err := outputWindowOf(r)
	if err != nil {
		return nil, err
	}
	user, err := userOf(r)
	if err != nil {
		return nil, err
	}
	asRoot := user == "root"
	argv := []string{cmd}
	for _, arg := range args {
		text, ok := arg.(string)
		if !ok {
			return nil, invalid("cmd and args: expected strings")
		}
		argv = append(argv, text)
	}
	if cmd == "" {
		return nil, invalid("cmd and args: expected strings")
	}
	texts := append([]string{cwd, tag}, argv...)
	for _, key := range envs.keys {
		value, ok := envs.values[key].(string)
		if key == "" || strings.Contains(key, "=") || !ok {
			return nil, invalid("envs: expected names and string values")
		}
		texts = append(texts, key, value)
	}
	if hasNUL(texts...) {
		return nil, invalid("a NUL in a string")
	}
	var rows, cols number
	if size != nil {
		if rows, err = (request{object: size}).count("rows", 1, 0xFFFF); err != nil {
			return nil, err
		}
		if cols, err = (request{object: size}).count("cols", 1, 0xFFFF); err != nil {
			return nil, err
		}
	}
	env := environment()
	if asRoot {
		// Root's own home (read-only, empty): a shell or python started as root reads no
		// profile or site-packages the user could have written.
		env.set("USER", "root").set("LOGNAME", "root").set("HOME", "/root")
	}
	for _, key := range envs.keys {
		env.set(key, envs.values[key])
	}
	if _, given := env.get("TERM"); size != nil && !given {
		env.set("TERM", "xterm-256color")
	}
	directory := home()
	if cwd != "" {
		if directory, err = resolve(cwd); err != nil {
			return nil, err
		}
	}
	asUser := rootInside && !asRoot

	var parentFDs, childFDs []int
	closeAll := func() {
		for _, fd := range append(parentFDs, childFDs...) {
			syscall.Close(fd)
		}
	}
	var stdio []uintptr
	var outputs []output
	stdin := -1
	if size != nil {
		master, terminal, err := openpty()
		if err != nil {
			return nil, err
		}
		parentFDs, childFDs = append(parentFDs, master), append(childFDs, terminal)
		if err := setWindowSize(terminal, rows.value, cols.value); err != nil {
			closeAll()
			return nil, err
		}
		if asUser {
			// the user's terminal, as a login gives it
			if err := syscall.Fchown(terminal, userUID, userUID); err != nil {
				closeAll()
				return nil, err
			}
		}
		stdio = []uintptr{uintptr(terminal), uintptr(terminal), uintptr(terminal)}
		outputs = []output{{master, "pty"}}
		stdin = master
	} else {
		var out, errs [2]int
		if err := syscall.Pipe2(out[:], syscall.O_CLOEXEC); err != nil {
			return nil, err
		}
		parentFDs, childFDs = append(parentFDs, out[0]), append(childFDs, out[1])
		if err := syscall.Pipe2(errs[:], syscall.O_CLOEXEC); err != nil {
			closeAll()
			return nil, err
		}
		parentFDs, childFDs = append(parentFDs, errs[0]), append(childFDs, errs[1])
		stdinChild := 0 // the agent's own fd 0 is /dev/null
		if keepStdin {
			var in [2]int
			if err := syscall.Pipe2(in[:], syscall.O_CLOEXEC); err != nil {
				closeAll()
				return nil, err
			}
			stdinChild, stdin = in[0], in[1]
			parentFDs, childFDs = append(parentFDs, stdin), append(childFDs, stdinChild)
		}
		stdio = []uintptr{uintptr(stdinChild), uintptr(out[1]), uintptr(errs[1])}
		outputs = []output{{out[0], "stdout"}, {errs[0], "stderr"}}
	}
	pid, err := spawn(argv, env, directory, stdio, size != nil, asUser)
	if err != nil {
		closeAll()
		return nil, err
	}
	for _, fd := range childFDs {
		syscall.Close(fd)
	}

	config := members{{"pid", pid}, {"cmd", cmd}, {"args", argv[1:]}, {"envs", envs}}
	if hasCwd {
		config = append(config, kv{"cwd", cwd})
	}
	if hasTag {
		config = append(config, kv{"tag", tag})
	}
	p := &process{pid: pid, config: config, pty: size != nil, stdin: stdin, window: window, credit: window}
	a.processes[pid] = p
	a.order = append(a.order, p)
	for _, out := range outputs {
		setNonblocking(out.fd)
		p.outputs = append(p.outputs, out)
		fd := out.fd
		a.setReader(fd, func() { a.readOutput(p, fd) })
	}
	if stdin >= 0 && size == nil {
		setNonblocking(stdin)
	}
	return members{{"pid", pid}}, nil
}

func setNonblocking(fd int) {
	_ = syscall.SetNonblock(fd, true)
}

// spawn starts argv in a session of its own, on stdio, in directory, as the user when asUser.
// A command without a slash is looked for in the PATH of its environment (or /bin:/usr/bin)
// as python's os.execvpe looks: each directory tried in turn, no shell for a file that is no
// executable, and the first error that is not a missing file said when none runs.
func spawn(argv []string, env *object, directory string, stdio []uintptr, terminal, asUser bool) (int, error) {
	environ := make([]string, 0, len(env.keys))
	for _, key := range env.keys {
		environ = append(environ, key+"="+env.values[key].(string))
	}
	attr := &syscall.ProcAttr{Dir: directory, Env: environ, Files: stdio, Sys: &syscall.SysProcAttr{Setsid: true, Setctty: terminal, Ctty: 0}}
	if asUser {
		attr.Sys.Credential = userCredential()
	}
	cmd := argv[0]
	candidates := []string{cmd}
	if !strings.Contains(cmd, "/") {
		path, ok := env.get("PATH")
		if !ok {
			path = "/bin:/usr/bin"
		}
		candidates = nil
		for _, dir := range strings.Split(path.(string), ":") {
			candidates = append(candidates, join(dir, cmd))
		}
	}
	var last, saved error
	for _, candidate := range candidates {
		var pid int
		fork := func() (err error) {
			pid, err = syscall.ForkExec(candidate, argv, attr)
			return err
		}
		var err error
		if asUser {
			err = withoutInheritable(fork)
		} else {
			err = fork()
		}
		if err == nil {
			return pid, nil
		}
		last = err
		if !isErrno(err, syscall.ENOENT, syscall.ENOTDIR) && saved == nil {
			saved = err
		}
	}
	if saved != nil {
		last = saved
	}
	return 0, named(last, cmd)
}

func opInput(a *agent, r request) (members, error) {
	p, err := a.runningProcess(r)
	if err != nil {
		return nil, err
	}
	data, err := r.data()
	if err != nil {
		return nil, err
	}
	if p.stdin < 0 || p.closeWhenWritten {
		return nil, refuse("invalid", "process %d takes no input", p.pid)
	}
	p.pending = append(p.pending, data...)
	if a.writers[p.stdin] == nil {
		a.writeInput(p)
	}
	if len(p.pending) > inputWindow {
		id, _ := r.lookup("id").(number)
		p.inputWaiting = append(p.inputWaiting, id)
		return nil, errAnsweredLater
	}
	return members{}, nil
}

// opReleaseInput answers every `input` held back (inputWindow) at once, its data still to be
// written: before a checkpoint the host must owe nothing, and a held answer is owed.
func opReleaseInput(a *agent, r request) (members, error) {
	for _, p := range a.order {
		a.answerHeldInput(p)
	}
	return members{}, nil
}

func opCloseStdin(a *agent, r request) (members, error) {
	p, err := a.runningProcess(r)
	if err != nil {
		return nil, err
	}
	if p.pty {
		// A terminal has no end of input to close: its end-of-file character (^D) says the
		// same to a program reading a line, as a user typing it would.
		p.pending = append(p.pending, 4)
		if p.stdin >= 0 && a.writers[p.stdin] == nil {
			a.writeInput(p)
		}
	} else if p.stdin >= 0 {
		p.closeWhenWritten = true
		if a.writers[p.stdin] == nil {
			a.writeInput(p)
		}
	}
	return members{}, nil
}

func opSignal(a *agent, r request) (members, error) {
	p, err := a.runningProcess(r)
	if err != nil {
		return nil, err
	}
	number, err := r.count("signal", 1, lastSignal)
	if err != nil {
		return nil, err
	}
	if p.connection {
		// A connection has no process to signal: any signal drops it.
		a.endConnection(p, syscall.WaitStatus(number.value))
		return members{}, nil
	}
	signalTree(p.pid, syscall.Signal(number.value))
	return members{}, nil
}

func opResize(a *agent, r request) (members, error) {
	p, err := a.runningProcess(r)
	if err != nil {
		return nil, err
	}
	rows, err := r.count("rows", 1, 0xFFFF)
	if err != nil {
		return nil, err
	}
	cols, err := r.count("cols", 1, 0xFFFF)
	if err != nil {
		return nil, err
	}
	if !p.pty || p.stdin < 0 {
		return nil, refuse("invalid", "process %d has no terminal", p.pid)
	}
	// The kernel signals the terminal's foreground group; the group the agent started gets
	// it too, in case that is not the foreground one.
	if err := setWindowSize(p.stdin, rows.value, cols.value); err != nil {
		return nil, err
	}
	_ = syscall.Kill(-p.pid, syscall.SIGWINCH)
	return members{}, nil
}

// opCredit: the host's readers took `bytes` of a process's output, so that much more may be
// sent. A process that ended meanwhile is no error (its last output may still be credited).
func opCredit(a *agent, r request) (members, error) {
	pid, err := r.count("pid", 1, noMaximum)
	if err != nil {
		return nil, err
	}
	credit, err := r.count("bytes", 0, noMaximum)
	if err != nil {
		return nil, err
	}
	p := a.processes[int(pid.value)]
	if p == nil {
		return members{}, nil
	}
	stopped := p.credit <= 0
	// Never more than a window ahead: a host that credits twice (a restored agent's new host)
	// gets no more in flight than it allows.
	sum := p.credit + credit.value
	if sum < p.credit {
		sum = math.MaxInt64
	}
	if sum > p.window {
		sum = p.window
	}
	p.credit = sum
	if stopped && p.credit > 0 {
		for _, out := range p.outputs {
			fd := out.fd
			a.setReader(fd, func() { a.readOutput(p, fd) })
		}
		if p.ended {
			p.deadline, p.draining = time.Now().Add(drainGrace), true
		}
	}
	return members{}, nil
}

func opList(a *agent, r request) (members, error) {
	processes := []any{}
	for _, p := range a.order {
		if !p.ended && !p.connection {
			processes = append(processes, p.config)
		}
	}
	return members{{"processes", processes}}, nil
}

// opPing is the host's heartbeat: an answer says the loop still turns.
func opPing(a *agent, r request) (members, error) { return members{}, nil }

// processTree is root and every process descending from it, by the parent each names in /proc.
func processTree(root int) []int {
	children := map[int][]int{}
	fd, err := syscall.Open("/proc", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err == nil {
		entries, _ := readDir(fd)
		syscall.Close(fd)
		for _, entry := range entries {
			pid, err := strconv.Atoi(entry.name)
			if err != nil || pid < 0 || entry.name[0] == '+' {
				continue
			}
			line, err := readSmallFile("/proc/" + entry.name + "/stat")
			if err != nil {
				continue
			}
			// The command name (field 2) may hold spaces and parentheses: the fields after
			// its last ')' are the state, then the parent.
			end := strings.LastIndexByte(string(line), ')')
			if end < 0 || end+2 > len(line) {
				continue
			}
			fields := strings.Fields(string(line[end+2:]))
			if len(fields) > 1 {
				if parent, err := strconv.Atoi(fields[1]); err == nil {
					children[parent] = append(children[parent], pid)
				}
			}
		}
	}
	var tree []int
	todo := []int{root}
	for len(todo) > 0 {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		tree = append(tree, pid)
		todo = append(todo, children[pid]...)
	}
	return tree
}

// signalTree sends number to the group pid leads and to every descendant, wherever its group:
// a process that made its own session must not outlive a kill of the tree that started it.
func signalTree(pid int, number syscall.Signal) {
	tree := processTree(pid)
	_ = syscall.Kill(-pid, number)
	for _, member := range tree {
		_ = syscall.Kill(member, number)
	}
}
