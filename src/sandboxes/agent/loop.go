package main

// The agent's one loop: poll over the host's requests, its processes' pipes and terminals,
// inotify and the SIGCHLD wakeup; each request run by its operation and answered by its id.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// version is the protocol: 2 has bytes raw after a message's JSON (contract/sandbox-agent.ts).
const version = "2"

type operation func(a *agent, r request) (members, error)

var operations = map[string]operation{
	"start": opStart, "connect": opConnect, "input": opInput, "release_input": opReleaseInput, "close_stdin": opCloseStdin, "signal": opSignal,
	"resize": opResize, "credit": opCredit, "list": opList, "ping": opPing,
	"stat": opStat, "mkdir": opMkdir, "move": opMove, "list_dir": opListDir, "remove": opRemove,
	"read": opRead, "write": opWrite, "watch": opWatch, "unwatch": opUnwatch,
}

// interrupt unwinds the loop on SIGINT: what the agent started is ended, then the agent.
type interrupt struct{}

// agent is one thread's loop over the requests, every child's pipes or terminal, the inotify
// fd and the SIGCHLD wakeup pipe: one thread, no goroutine races over a child's descriptors.
type agent struct {
	protoIn, protoOut int
	// registered are the descriptors the loop polls, in the order they were first wanted
	// (python's poll object keeps them so); readers and writers say what each is wanted for.
	registered []int
	readers    map[int]func()
	writers    map[int]func()
	processes  map[int]*process
	order      []*process // the processes, in the order they started
	watches    map[int]*watch
	watchIDs   int
	// wdWatches are the watches each inotify watch descriptor serves (two watches of one
	// directory share its descriptor).
	wdWatches    map[int]map[int]bool
	inotify      int
	requests     []byte
	skipping     int
	running      bool
	wakeRead     int
	interrupted  atomic.Bool
	outputBuffer []byte
	// sudoPids are the commands sudo asked for, by the connection that asked (sudo.go), and
	// sudoConns the connections by command.
	sudoPids, sudoConns map[int]int
	// lastConnection numbers the connections it made (opConnect), from firstConnection.
	lastConnection int
}

func newAgent(protoIn, protoOut int) *agent {
	return &agent{
		protoIn: protoIn, protoOut: protoOut,
		readers: map[int]func(){}, writers: map[int]func(){},
		processes: map[int]*process{}, watches: map[int]*watch{}, wdWatches: map[int]map[int]bool{},
		inotify: -1, running: true, outputBuffer: make([]byte, outputChunk),
		sudoPids: map[int]int{}, sudoConns: map[int]int{},
	}
}

func (a *agent) setReader(fd int, fn func()) { a.readers[fd] = fn; a.update(fd) }
func (a *agent) setWriter(fd int, fn func()) { a.writers[fd] = fn; a.update(fd) }
func (a *agent) dropReader(fd int)           { delete(a.readers, fd); a.update(fd) }
func (a *agent) dropWriter(fd int)           { delete(a.writers, fd); a.update(fd) }
func (a *agent) dropAll(fd int)              { delete(a.readers, fd); delete(a.writers, fd); a.update(fd) }

// update keeps fd in registered while something is wanted of it.
func (a *agent) update(fd int) {
	wanted := a.readers[fd] != nil || a.writers[fd] != nil
	for i, other := range a.registered {
		if other == fd {
			if !wanted {
				a.registered = append(a.registered[:i], a.registered[i+1:]...)
			}
			return
		}
	}
	if wanted {
		a.registered = append(a.registered, fd)
	}
}

func (a *agent) run() {
	var wake [2]int
	if err := syscall.Pipe2(wake[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		panic(fatal{err})
	}
	a.wakeRead = wake[0]
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGCHLD)
	// As python: a SIGINT the agent was started ignoring stays ignored, by it and its children.
	if !signal.Ignored(syscall.SIGINT) {
		signal.Notify(signals, syscall.SIGINT)
	}
	go func() {
		for received := range signals {
			if received == syscall.SIGINT {
				a.interrupted.Store(true)
			}
			_, _ = syscall.Write(wake[1], []byte{0})
		}
	}()
	a.setReader(a.wakeRead, a.reap)
	a.setReader(a.protoIn, a.readRequests)
	a.listenSudo()
	a.send(members{{"ready", true}, {"version", version}})
	defer a.shutDown()
	a.serve()
}

func (a *agent) serve() {
	var fds []pollFd
	for a.running {
		timeout := -1
		var earliest time.Time
		for _, p := range a.order {
			if p.draining && (earliest.IsZero() || p.deadline.Before(earliest)) {
				earliest = p.deadline
			}
		}
		if !earliest.IsZero() {
			timeout = 0
			if left := time.Until(earliest); left > 0 {
				timeout = int((left + time.Millisecond - 1) / time.Millisecond)
			}
		}
		fds = fds[:0]
		for _, fd := range a.registered {
			var events int16
			if a.readers[fd] != nil {
				events |= pollIn
			}
			if a.writers[fd] != nil {
				events |= pollOut
			}
			fds = append(fds, pollFd{fd: int32(fd), events: events})
		}
		if _, err := poll(fds, timeout); err != nil && err != syscall.EINTR {
			panic(fatal{err})
		}
		if a.interrupted.Load() {
			panic(interrupt{})
		}
		for _, ready := range fds {
			if ready.revents == 0 {
				continue
			}
			fd := int(ready.fd)
			// As python's selectors reads poll: anything but POLLOUT (a hang-up, an error)
			// wakes a reader, anything but POLLIN a writer.
			if ready.revents&^pollOut != 0 && ready.events&pollIn != 0 && a.readers[fd] != nil {
				a.readers[fd]()
			}
			if ready.revents&^pollIn != 0 && ready.events&pollOut != 0 && a.writers[fd] != nil {
				a.writers[fd]()
			}
			if !a.running {
				break
			}
		}
		now := time.Now()
		for _, p := range append([]*process{}, a.order...) {
			if p.draining && !p.deadline.After(now) {
				a.stopReading(p)
			}
		}
	}
}

func (a *agent) handle(payload []byte) {
	// A NUL ends the JSON (JSON text holds none): what follows is the request's bytes, a view of
	// the frame, which every operation is done with before the next frame is read (an input
	// appends them to what its process has pending; a write writes them).
	var raw []byte
	if at := bytes.IndexByte(payload, 0); at >= 0 {
		raw = payload[at+1 : len(payload) : len(payload)]
		payload = payload[:at]
	}
	if !utf8.Valid(payload) {
		return
	}
	value, err := parseJSON(string(payload))
	if err != nil {
		return // no id to answer: nothing to say
	}
	message, ok := value.(*object)
	if !ok {
		return
	}
	id, ok := message.values["id"].(number)
	if !ok || id.value < 1 {
		return
	}
	reply := a.perform(request{message, raw})
	if reply == nil {
		return // answered later, by the operation itself (opInput)
	}
	a.send(append(reply, kv{"id", id}))
}

// errAnsweredLater is what an operation returns when it answers its request itself, later (an
// `input` held back until the process reads: inputWindow); perform then returns no reply.
var errAnsweredLater = errors.New("answered later")

// perform runs a request's operation, as the user it names for a file operation.
func (a *agent) perform(r request) (reply members) {
	defer func() {
		if failure := recover(); failure != nil {
			switch failure.(type) {
			case hostGone, fatal, interrupt:
				panic(failure)
			}
			reply = members{{"error", members{{"code", "failed"}, {"message", fmt.Sprint(failure)}}}}
		}
	}()
	name, _ := r.lookup("op").(string)
	op := operations[name]
	if op == nil {
		return members{{"error", failureOf(invalid("unknown op"))}}
	}
	user := "root"
	if fileOperations[name] {
		var err error
		if user, err = userOf(r); err != nil {
			return members{{"error", failureOf(err)}}
		}
	}
	err := actingAs(user, func() (err error) {
		reply, err = op(a, r)
		return err
	})
	if err == errAnsweredLater {
		return nil
	}
	if err != nil {
		return members{{"error", failureOf(err)}}
	}
	return reply
}

// shutDown: the host is gone, so nothing the agent started outlives it, including what those
// processes left behind (reparented to the agent, its subreaper).
func (a *agent) shutDown() {
	for round := 0; round < 5; round++ {
		var running []*process
		for _, p := range a.order {
			if !p.ended {
				running = append(running, p)
			}
		}
		tree := processTree(os.Getpid())[1:]
		for _, p := range running {
			tree = append(tree, processTree(p.pid)...)
		}
		if len(tree) == 0 {
			break
		}
		for _, p := range running {
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		}
		for _, pid := range tree {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		// Reaped, so that none is left a zombie for whoever watches its pid.
		giveUp := time.Now().Add(time.Second)
		for time.Now().Before(giveUp) {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if err != nil {
				break
			}
			if pid == 0 {
				time.Sleep(10 * time.Millisecond)
			} else if p := a.processes[pid]; p != nil {
				p.ended, p.status = true, status
			}
		}
	}
}
