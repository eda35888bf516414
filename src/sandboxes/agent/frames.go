package main

// Frames are a 4-byte big-endian length and that much UTF-8 JSON (src/wire/frame-codec.ts):
// requests on the agent's input, replies and events on its output. A message with bytes (a
// file's chunk, a process's input or output) has them raw after its JSON, past a NUL.

import (
	"strconv"
	"syscall"
)

// rawBytes is a reply member sent as the bytes after the JSON instead of in it (its key unused).
type rawBytes []byte

// A request frame longer than this is skipped unread: no request of the contract comes near it.
const maxRequest = 64 * 1024 * 1024

// hostGone unwinds the loop when the host stopped reading: the agent ends, as after its input.
type hostGone struct{}

// fatal unwinds the loop on a failure of the agent's own descriptors.
type fatal struct{ err error }

func (a *agent) send(message members) {
	fields := make(members, 0, len(message))
	var raw rawBytes
	for _, member := range message {
		if bytes, ok := member.value.(rawBytes); ok {
			raw = bytes
		} else {
			fields = append(fields, member)
		}
	}
	e := encoder{out: make([]byte, 4, 256+len(raw))}
	e.value(fields)
	if raw != nil {
		e.out = append(append(e.out, 0), raw...)
	}
	a.sendFrame(e.out)
}

// sendFrame writes a frame whose payload follows 4 bytes left for its length.
func (a *agent) sendFrame(buffer []byte) {
	length := len(buffer) - 4
	buffer[0], buffer[1], buffer[2], buffer[3] = byte(length>>24), byte(length>>16), byte(length>>8), byte(length)
	if err := writeAll(a.protoOut, buffer); err != nil {
		if err == syscall.EPIPE {
			panic(hostGone{})
		}
		panic(fatal{err})
	}
}

// outputFrame is an output event written out directly: output is most of what the agent sends.
func outputFrame(pid int, stream string, data []byte) []byte {
	buffer := make([]byte, 4, 64+len(stream)+len(data))
	buffer = append(buffer, `{"event":"output","pid":`...)
	buffer = strconv.AppendInt(buffer, int64(pid), 10)
	buffer = append(buffer, `,"stream":"`...)
	buffer = append(buffer, stream...)
	buffer = append(buffer, `"}`...)
	return append(append(buffer, 0), data...)
}

// inputRead is the room left for each read of the host's input: a pipe gives at most its size.
const inputRead = 256 * 1024

// readRequests takes what the host wrote and handles every whole frame in it.
func (a *agent) readRequests() {
	// Room for what comes: the whole of a frame whose length is known (a file's chunk is a MiB,
	// read a pipe's worth at a time), else a read's worth. The unread part moves to a new buffer
	// once per frame, not once per read: growing by a read at a time copied a MiB frame some
	// sixteen times over (about 100 MiB/s for a file written through the agent).
	need := inputRead
	if len(a.requests) >= 4 {
		if length := int(a.requests[0])<<24 | int(a.requests[1])<<16 | int(a.requests[2])<<8 | int(a.requests[3]); length <= maxRequest && 4+length > len(a.requests) {
			need = 4 + length - len(a.requests)
		}
	}
	if cap(a.requests)-len(a.requests) < need {
		grown := make([]byte, len(a.requests), len(a.requests)+need+inputRead)
		copy(grown, a.requests)
		a.requests = grown
	}
	n, err := syscall.Read(a.protoIn, a.requests[len(a.requests):cap(a.requests)])
	if err == syscall.EAGAIN || err == syscall.EINTR {
		return
	}
	if err != nil {
		panic(fatal{err})
	}
	if n == 0 {
		a.running = false
		return
	}
	a.requests = a.requests[:len(a.requests)+n]
	for {
		if a.skipping > 0 {
			skipped := a.skipping
			if skipped > len(a.requests) {
				skipped = len(a.requests)
			}
			a.requests = a.requests[skipped:]
			a.skipping -= skipped
			if a.skipping > 0 {
				return
			}
		}
		if len(a.requests) < 4 {
			return
		}
		length := int(a.requests[0])<<24 | int(a.requests[1])<<16 | int(a.requests[2])<<8 | int(a.requests[3])
		if length > maxRequest {
			a.requests = a.requests[4:]
			a.skipping = length
			continue
		}
		if len(a.requests) < 4+length {
			return
		}
		payload := a.requests[4 : 4+length]
		a.requests = a.requests[4+length:]
		a.handle(payload)
	}
}
