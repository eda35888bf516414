package main

// The agent's framing (frames.go) over real pipes, as the host writes and reads it: a 4-byte
// big-endian length, the JSON, and raw bytes after a NUL.

import (
	"encoding/binary"
	"strings"
	"syscall"
	"testing"
)

// pipedAgent is an agent whose protocol is two pipes: the test writes requests to `requests`
// and reads what the agent sent from `replies`.
func pipedAgent(t *testing.T) (a *agent, requests, replies int) {
	t.Helper()
	var in, out [2]int
	for _, pipe := range []*[2]int{&in, &out} {
		if err := syscall.Pipe2(pipe[:], syscall.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.SetNonblock(out[0], true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, fd := range []int{in[0], in[1], out[0], out[1]} {
			syscall.Close(fd)
		}
	})
	return newAgent(in[0], out[1]), in[1], out[0]
}

func frame(payload string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

func write(t *testing.T, fd int, data []byte) {
	t.Helper()
	if err := writeAll(fd, data); err != nil {
		t.Fatal(err)
	}
}

// sent is every frame's payload the agent has written so far.
func sent(t *testing.T, fd int) []string {
	t.Helper()
	var data []byte
	buffer := make([]byte, 64*1024)
	for {
		n, err := syscall.Read(fd, buffer)
		if err == syscall.EAGAIN || n == 0 {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, buffer[:n]...)
	}
	var payloads []string
	for len(data) > 0 {
		if len(data) < 4 || len(data) < 4+int(binary.BigEndian.Uint32(data)) {
			t.Fatalf("a partial frame: %q", data)
		}
		length := int(binary.BigEndian.Uint32(data))
		payloads = append(payloads, string(data[4:4+length]))
		data = data[4+length:]
	}
	return payloads
}

func TestFramesAreAnsweredWholeByID(t *testing.T) {
	a, requests, replies := pipedAgent(t)
	ping := frame(`{"id": 1, "op": "ping"}`)
	// Half a frame is kept until the rest comes.
	write(t, requests, ping[:6])
	a.readRequests()
	if got := sent(t, replies); len(got) != 0 {
		t.Fatalf("answered half a frame: %q", got)
	}
	write(t, requests, ping[6:])
	a.readRequests()
	// Two frames in one read, both answered in order; an id is echoed as written, past int64 too.
	write(t, requests, append(frame(`{"op": "nonsense", "id": 2}`), frame(`{"id": 123456789012345678901234567890, "op": "ping"}`)...))
	a.readRequests()
	want := []string{`{"id":1}`, `{"error":{"code":"invalid","message":"unknown op"},"id":2}`, `{"id":123456789012345678901234567890}`}
	if got := sent(t, replies); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent %q, want %q", got, want)
	}
}

func TestAFrameWithoutAnIdIsNotAnswered(t *testing.T) {
	a, requests, replies := pipedAgent(t)
	for _, payload := range []string{`{"op": "ping"}`, `{"id": 0, "op": "ping"}`, `{"id": "1", "op": "ping"}`, `{"id": 1.0, "op": "ping"}`, `[1]`, `not json`, "{\"id\": 1, \"op\": \"\xff\"}"} {
		write(t, requests, frame(payload))
	}
	write(t, requests, frame(`{"id": 9, "op": "ping"}`))
	a.readRequests()
	if got := sent(t, replies); len(got) != 1 || got[0] != `{"id":9}` {
		t.Errorf("sent %q, want only the answer to id 9", got)
	}
}

func TestAFrameOverTheLimitIsSkippedUnread(t *testing.T) {
	a, requests, replies := pipedAgent(t)
	go func() {
		oversized := binary.BigEndian.AppendUint32(nil, maxRequest+1)
		_ = writeAll(requests, oversized)
		_ = writeAll(requests, make([]byte, maxRequest+1))
		_ = writeAll(requests, frame(`{"id": 5, "op": "ping"}`))
		syscall.Close(requests)
	}()
	for a.running {
		a.readRequests()
		if cap(a.requests) > 4*inputRead {
			t.Fatalf("the skipped frame was held: %d bytes", cap(a.requests))
		}
	}
	if got := sent(t, replies); len(got) != 1 || got[0] != `{"id":5}` {
		t.Errorf("sent %q, want the answer to the frame after the skipped one", got)
	}
}

func TestRawBytesFollowTheJSON(t *testing.T) {
	a, _, replies := pipedAgent(t)
	data := []byte("out\x00put")
	a.send(members{{"event", "output"}, {"pid", 7}, {"stream", "stdout"}, {"data", rawBytes(data)}})
	got := sent(t, replies)
	want := `{"event":"output","pid":7,"stream":"stdout"}` + "\x00" + string(data)
	if len(got) != 1 || got[0] != want {
		t.Errorf("sent %q, want %q", got, want)
	}
	// The output event written directly is the same frame, length and all.
	a.sendFrame(outputFrame(7, "stdout", data))
	if again := sent(t, replies); len(again) != 1 || again[0] != want {
		t.Errorf("outputFrame sent %q, want %q", again, want)
	}
}
