package main

// Failures as the host reads them (errors.go): each errno's word, which must be one of the
// contract's, and python's OSError text.

import (
	"os"
	"regexp"
	"syscall"
	"testing"
)

func TestEveryCodeIsTheContracts(t *testing.T) {
	// The host checks every reply against contract/sandbox-agent.ts: a word it does not know
	// would end the sandbox.
	source, err := os.ReadFile("../../contract/sandbox-agent.ts")
	if err != nil {
		t.Fatal(err)
	}
	union := regexp.MustCompile(`(?s)AgentErrorCodeSchema = Type\.Union\(\[(.*?)\]\)`).FindSubmatch(source)
	if union == nil {
		t.Fatal("no AgentErrorCodeSchema in contract/sandbox-agent.ts")
	}
	known := map[string]bool{}
	for _, literal := range regexp.MustCompile(`Type\.Literal\('([a-z_]+)'\)`).FindAllSubmatch(union[1], -1) {
		known[string(literal[1])] = true
	}
	words := []string{"failed"}
	for _, word := range codes {
		words = append(words, word)
	}
	for _, word := range words {
		if !known[word] {
			t.Errorf("%q is no AgentErrorCode", word)
		}
	}
}

func TestFailureOf(t *testing.T) {
	for _, c := range []struct {
		err           error
		code, message string
	}{
		{named(syscall.ENOENT, "/home/user/x"), "not_found", "No such file or directory: /home/user/x"},
		{named(syscall.ENOTEMPTY, "/d"), "exists", "Directory not empty: /d"},
		{named(syscall.ELOOP, "/l"), "invalid", "Too many levels of symbolic links: /l"},
		// What the request did not cause is the agent's own fault.
		{named(syscall.EIO, "/f"), "failed", "Input/output error: /f"},
		{syscall.EACCES, "permission_denied", "Permission denied"},
		// python refuses a name with a NUL before any system call.
		{named(syscall.ENOENT, "a\x00b"), "invalid", "embedded null byte"},
		{refuse("too_large", "the listing is over %d entries", 3), "too_large", "the listing is over 3 entries"},
	} {
		failure := failureOf(c.err)
		if failure[0].value != c.code || failure[1].value != c.message {
			t.Errorf("failureOf(%v) = %v, want %s %q", c.err, failure, c.code, c.message)
		}
	}
	if !isErrno(named(syscall.EXDEV, "/x"), syscall.ENOENT, syscall.EXDEV) || isErrno(invalid("x"), syscall.EINVAL) {
		t.Error("isErrno does not see through a named errno, or sees one in a refusal")
	}
}
