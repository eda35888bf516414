package main

import (
	"net"
	"strconv"
	"syscall"
)

// A port of the sandbox reached from outside (E2B's `{port}-{id}.{domain}`): the agent, which is
// in the sandbox's network namespace, makes the TCP connection to the port on the sandbox's
// loopback itself, and serves it as a process whose stdin is what the host sends and whose
// stdout is what the server answers, with the same windows both ways; it ends (exit 0) once the
// server has closed its side. No process starts for it: a relay process a connection cost some
// 5 ms a request. To the sandbox's server it is a client on its own loopback, whatever network
// the sandbox has.

// firstConnection is above any pid the kernel gives (pid_max is at most 2^22), so the ids of
// connections and processes never meet.
const firstConnection = 1 << 22

// dialLoopback connects to the port on 127.0.0.1, then ::1: the socket, blocking until connected
// (on loopback a refusal or an accept is at once), left non-blocking.
func dialLoopback(port int) (int, error) {
	var last error
	for _, host := range []string{"127.0.0.1", "::1"} {
		conn, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			last = err
			continue
		}
		file, err := conn.(*net.TCPConn).File()
		_ = conn.Close()
		if err != nil {
			return -1, err
		}
		// File() gave a blocking duplicate of its own; the loop wants it non-blocking.
		fd, err := syscall.Dup(int(file.Fd()))
		_ = file.Close()
		if err != nil {
			return -1, err
		}
		syscall.CloseOnExec(fd)
		setNonblocking(fd)
		return fd, nil
	}
	return -1, last
}

func opConnect(a *agent, r request) (members, error) {
	port, err := r.count("port", 1, 65535)
	if err != nil {
		return nil, err
	}
	window, err := outputWindowOf(r)
	if err != nil {
		return nil, err
	}
	fd, err := dialLoopback(int(port.value))
	if err != nil {
		return nil, refuse("refused", "%v", err)
	}
	in, err := syscall.Dup(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, err
	}
	syscall.CloseOnExec(in)
	a.lastConnection++
	p := &process{
		pid:        firstConnection + a.lastConnection,
		connection: true,
		outputs:    []output{{fd, "stdout"}},
		stdin:      in,
		window:     window,
		credit:     window,
	}
	a.processes[p.pid] = p
	a.order = append(a.order, p)
	a.setReader(fd, func() { a.readOutput(p, fd) })
	return members{{"pid", p.pid}}, nil
}

// endConnection closes what is left of a connection (its server closed its side, or the host
// dropped it with a signal), reporting its end with `status`.
func (a *agent) endConnection(p *process, status syscall.WaitStatus) {
	if p.ended {
		return
	}
	for _, out := range append([]output{}, p.outputs...) {
		a.closeOutput(p, out.fd)
	}
	if p.stdin >= 0 {
		a.dropAll(p.stdin)
		syscall.Close(p.stdin)
		p.stdin = -1
	}
	p.pending = nil
	p.ended, p.status = true, status
	a.answerInput(p)
	a.finish(p)
}
