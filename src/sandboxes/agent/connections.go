package main

// A port of the sandbox reached from outside (E2B's `{port}-{id}.{domain}`): the agent, which is
// in the sandbox's network namespace, makes the TCP connection to the port on the sandbox's
// loopback itself, and serves it as a process whose stdin is what the host sends and whose
// stdout is what the server answers, with the same windows both ways; it ends (exit 0) once the
// server has closed its side. No process starts for it: a relay process a connection cost some
// 5 ms a request. To the sandbox's server it is a client on its own loopback, whatever network
// the sandbox has.

import (
	"syscall"
)

// firstConnection is above any pid the kernel gives (pid_max is at most 2^22), so the ids of
// connections and processes never meet.
const firstConnection = 1 << 22

// dialLoopback connects to the port on 127.0.0.1, then ::1: the socket, connected by a plain
// blocking connect (on loopback a refusal or an accept is at once: no poller, no goroutine, which
// Go's net.Dial took some of a millisecond for), left non-blocking for the loop.
func dialLoopback(port int) (int, error) {
	var last error
	for _, address := range []struct {
		family int
		socket syscall.Sockaddr
	}{
		{syscall.AF_INET, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}},
		{syscall.AF_INET6, &syscall.SockaddrInet6{Port: port, Addr: [16]byte{15: 1}}},
	} {
		fd, err := syscall.Socket(address.family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			last = err
			continue
		}
		if err := connectRetrying(fd, address.socket); err != nil {
			syscall.Close(fd)
			last = err
			continue
		}
		setNonblocking(fd)
		return fd, nil
	}
	return -1, last
}

// connectRetrying is connect(2), again after a signal interrupted it: the connection goes on
// meanwhile, so a later call says it is under way (EALREADY, on loopback for microseconds) or
// made (EISCONN).
func connectRetrying(fd int, address syscall.Sockaddr) error {
	interrupted := false
	for {
		err := syscall.Connect(fd, address)
		switch {
		case err == syscall.EINTR || (interrupted && err == syscall.EALREADY):
			interrupted = true
		case interrupted && err == syscall.EISCONN:
			return nil
		default:
			return err
		}
	}
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
