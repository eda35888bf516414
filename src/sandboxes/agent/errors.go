package main

// Failures as the wire says them: an errno's contract code and python's OSError text, a
// refusal's own code, and the reply's `error` made of either.

import (
	"fmt"
	"strings"
	"syscall"
)

// codes are the contract's words for every errno an operation may meet (AgentErrorCode in
// contract/sandbox-agent.ts): what the request or
// the sandbox's own files caused is the caller's to fix, so it has a word; only what is left
// (EIO, ENOMEM...) is `failed`, a fault of ours.
var codes = map[syscall.Errno]string{
	syscall.ENOENT:    "not_found",
	syscall.EEXIST:    "exists",
	syscall.ENOTEMPTY: "exists",
	syscall.ENOTDIR:   "not_a_directory",
	syscall.EISDIR:    "is_a_directory",
	syscall.EACCES:    "permission_denied",
	syscall.EPERM:     "permission_denied",
	syscall.EROFS:     "permission_denied",
	syscall.EINVAL:    "invalid",
	// A name over 255 bytes or a path over 4095, a loop of links, a move across file systems
	// or into itself, a directory in use (a mount point), a command line or environment over
	// what exec takes, a program that is no executable.
	syscall.ENAMETOOLONG: "invalid",
	syscall.ELOOP:        "invalid",
	syscall.EXDEV:        "invalid",
	syscall.EBUSY:        "invalid",
	syscall.E2BIG:        "invalid",
	syscall.ENOEXEC:      "invalid",
	syscall.ETXTBSY:      "invalid",
	// open() of a FIFO no one reads, of a socket, or of a device without its driver.
	syscall.ENXIO:  "not_regular",
	syscall.ENODEV: "not_regular",
	syscall.ENOSPC: "no_space",
	syscall.EDQUOT: "no_space",
	syscall.EFBIG:  "no_space",
	syscall.ESRCH:  "no_such_process",
}

// refusal is a failure with the contract's code said outright: a request without the
// contract's shape (`invalid`), or an operation refused for a reason of the agent's own.
type refusal struct {
	code    string
	message string
}

func (r *refusal) Error() string { return r.message }

func refuse(code, format string, args ...any) error {
	return &refusal{code: code, message: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) error { return refuse("invalid", format, args...) }

// osError is an errno with the name of what it was met on, said as python's OSError says it.
type osError struct {
	errno syscall.Errno
	name  string
	named bool
}

func (e *osError) Error() string { return e.message() }

func (e *osError) message() string {
	text := strerror(e.errno)
	if e.named {
		text += ": " + e.name
	}
	return text
}

// named gives err, when it is an errno, the name python's OSError would carry for it. A name
// with a NUL never reached the system: python refuses it first, in its own words.
func named(err error, name string) error {
	if strings.IndexByte(name, 0) >= 0 {
		return invalid("embedded null byte")
	}
	if errno, ok := err.(syscall.Errno); ok {
		return &osError{errno: errno, name: name, named: true}
	}
	return err
}

// errnoOf is err's errno, when it has one.
func errnoOf(err error) (syscall.Errno, bool) {
	switch e := err.(type) {
	case syscall.Errno:
		return e, true
	case *osError:
		return e.errno, true
	}
	return 0, false
}

func isErrno(err error, numbers ...syscall.Errno) bool {
	errno, ok := errnoOf(err)
	if !ok {
		return false
	}
	for _, number := range numbers {
		if errno == number {
			return true
		}
	}
	return false
}

// strerror is the C library's text for an errno: Go's own table has the same words, in lower
// case.
func strerror(errno syscall.Errno) string {
	text := errno.Error()
	if len(text) > 0 && text[0] >= 'a' && text[0] <= 'z' {
		text = string(text[0]-'a'+'A') + text[1:]
	}
	return text
}

// failureOf is the reply's `error` for err.
func failureOf(err error) members {
	code, message := "failed", err.Error()
	switch e := err.(type) {
	case *refusal:
		code = e.code
	case *osError:
		if word, ok := codes[e.errno]; ok {
			code = word
		}
	case syscall.Errno:
		if word, ok := codes[e]; ok {
			code = word
		}
		message = strerror(e)
	}
	return members{{"code", code}, {"message", message}}
}
