package main

// The port relay: the same program, run by the host (never inside a sandbox) in one sandbox's
// network namespace (src/isolation/host/port-relay.ts: nsenter --net, `port-relay SOCKET`), so
// the host reaches a server on the sandbox's loopback without a round trip through the agent's
// protocol for each connection and each piece of it.
// It listens on a unix socket at a host path (unix sockets are named in the mount namespace,
// which stays the host's), in a directory only the host's root may enter; then it drops to
// nobody: all it does after is connect to the sandbox's loopback and copy bytes.
//
// Per connection the host writes the port in decimal and a newline; the relay answers "+\n"
// once it is connected to that port on the sandbox's loopback (127.0.0.1, else ::1), or "-" and
// why, then closes. After "+" the bytes go both ways as they come, each side's end of writing
// passed on, until both ended.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	nobodyID = 65534
	// How long a connection may take to name its port.
	relayHeaderDeadline = 10 * time.Second
)

// relayMain serves the socket at args[0] until the host kills it (it runs with PDEATHSIG).
func relayMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-agent port-relay <socket path>")
		return 2
	}
	listener, err := net.Listen("unix", args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "port-relay:", err)
		return 1
	}
	if err := dropToNobody(); err != nil {
		fmt.Fprintln(os.Stderr, "port-relay: dropping privileges:", err)
		return 1
	}
	// The host waits for this line before it connects.
	fmt.Println("ready")
	for {
		connection, err := listener.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "port-relay:", err)
			return 1
		}
		go relay(connection.(*net.UnixConn))
	}
}

// dropToNobody gives up root (Go sets the ids of every thread): a relay that something in the
// sandbox fooled holds nothing of the host's but its listening socket.
func dropToNobody() error {
	if err := syscall.Setgroups([]int{}); err != nil {
		return err
	}
	if err := syscall.Setgid(nobodyID); err != nil {
		return err
	}
	return syscall.Setuid(nobodyID)
}

func relay(host *net.UnixConn) {
	defer host.Close()
	_ = host.SetReadDeadline(time.Now().Add(relayHeaderDeadline))
	reader := bufio.NewReaderSize(host, 64*1024)
	line, err := reader.ReadString('\n')
	if err != nil {
		return
	}
	port, err := strconv.Atoi(strings.TrimSuffix(line, "\n"))
	if err != nil || port < 1 || port > 65535 {
		_, _ = io.WriteString(host, "-not a port\n")
		return
	}
	_ = host.SetReadDeadline(time.Time{})
	fd, err := dialLoopback(port)
	if err != nil {
		_, _ = io.WriteString(host, "-"+err.Error()+"\n")
		return
	}
	file := os.NewFile(uintptr(fd), "")
	server, err := net.FileConn(file)
	file.Close()
	if err != nil {
		_, _ = io.WriteString(host, "-"+err.Error()+"\n")
		return
	}
	defer server.Close()
	if _, err := io.WriteString(host, "+\n"); err != nil {
		return
	}
	var both sync.WaitGroup
	both.Add(2)
	// What the host sent past its port line is in the reader's buffer: it goes first.
	go pass(&both, server.(*net.TCPConn), reader)
	go pass(&both, host, server)
	both.Wait()
}

// pass copies from one side to the other until the reader's end, then ends the writer's side.
func pass(done *sync.WaitGroup, to interface {
	io.Writer
	CloseWrite() error
}, from io.Reader) {
	defer done.Done()
	_, err := io.Copy(to, from)
	if err != nil {
		// A side that failed takes the connection down: the other copy's reads fail too.
		if closer, ok := to.(io.Closer); ok {
			_ = closer.Close()
		}
		if closer, ok := from.(io.Closer); ok {
			_ = closer.Close()
		}
		return
	}
	_ = to.CloseWrite()
}
