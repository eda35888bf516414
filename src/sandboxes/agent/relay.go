package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
)

// A port of the sandbox reached from outside (E2B's `{port}-{id}.{domain}`): the host runs this
// program, the agent's own binary as `sandbox-agent relay PORT`, as a process of the sandbox, and
// its stdin and stdout become one TCP connection to the port on the sandbox's loopback (IPv4,
// then IPv6). The host's end speaks HTTP or WebSocket over it; to the sandbox's server it is a
// client on its own loopback, whatever network the sandbox has.

// relayRefused is the exit status of a relay whose port nobody listens on: the host answers the
// closed port as E2B's proxy does.
const relayRefused = 111

func relayMain(args []string) int {
	if len(args) != 1 {
		args = []string{""}
	}
	port, err := strconv.Atoi(args[0])
	if err != nil || port < 1 || port > 65535 {
		fmt.Fprintln(os.Stderr, "relay: usage: sandbox-agent relay PORT (1 to 65535)")
		return 2
	}
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		conn, err = net.Dial("tcp", net.JoinHostPort("::1", strconv.Itoa(port)))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return relayRefused
	}
	tcp := conn.(*net.TCPConn)
	// The host's end closing what it sends is the client's half-close, passed on; the server's
	// end closing is the relay's.
	go func() {
		_, _ = io.Copy(tcp, os.Stdin)
		_ = tcp.CloseWrite()
	}()
	_, _ = io.Copy(os.Stdout, tcp)
	return 0
}
