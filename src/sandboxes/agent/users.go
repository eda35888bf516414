package main

// Whom a request acts as (E2B's user, or root inside), the ids and capabilities that takes, and
// owner and group names read from the sandbox's /etc/passwd and /etc/group.

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// E2B's user. Made with root inside (SandboxTemplate.rootInside, said by the `root-inside`
// argument) the agent is uid 0 of the sandbox's own user namespace, where the user is mapped
// too: a process runs as the user (no capability) or as root, and a file request acts as the
// one it names. Otherwise (a backend without it, or run as anyone else) both names run as the
// agent.
const userUID = 1000

var rootInside = func() bool {
	for _, argument := range os.Args[1:] {
		if argument == "root-inside" {
			return syscall.Getuid() == 0
		}
	}
	return false
}()

// fileOperations act as the user their request names; the others are the agent's own.
var fileOperations = map[string]bool{"stat": true, "mkdir": true, "move": true, "list_dir": true, "remove": true, "read": true, "write": true, "watch": true}

// userOf is whom a request acts as: "root" only where root exists here, "user" by default.
func userOf(r request) (string, error) {
	name, given, err := r.optionalText("user")
	if err != nil {
		return "", err
	}
	if given && name != "user" && name != "root" { // contract/sandbox-agent.ts AGENT_USERS
		return "", invalid("user: expected user or root")
	}
	if name == "root" && rootInside {
		return "root", nil
	}
	return "user", nil
}

// actingAs runs fn, root inside and for the user, with the user's effective ids: what it makes
// is the user's, and what the user may not touch it may not either. Only the calling thread
// changes (the agent's one loop is locked to it, main.go), and root's ids come back after.
func actingAs(user string, fn func() error) error {
	if !rootInside || user != "user" {
		return fn()
	}
	if err := setEffectiveIDs(syscall.SYS_SETRESGID, userUID); err != nil {
		return err
	}
	if err := setEffectiveIDs(syscall.SYS_SETRESUID, userUID); err != nil {
		restoreIDs(syscall.SYS_SETRESGID)
		return err
	}
	defer func() {
		restoreIDs(syscall.SYS_SETRESUID)
		restoreIDs(syscall.SYS_SETRESGID)
	}()
	return fn()
}

// asRootAgain runs fn, from within actingAs the user, with root's effective ids; the user's come
// back after it.
func asRootAgain(fn func() error) error {
	restoreIDs(syscall.SYS_SETRESUID)
	restoreIDs(syscall.SYS_SETRESGID)
	defer func() {
		if setEffectiveIDs(syscall.SYS_SETRESGID, userUID) != nil || setEffectiveIDs(syscall.SYS_SETRESUID, userUID) != nil {
			panic("cannot act as the user again")
		}
	}()
	return fn()
}

func restoreIDs(call uintptr) {
	if err := setEffectiveIDs(call, 0); err != nil {
		panic("cannot become root again: " + err.Error())
	}
}

// userCredential is what a process started as the user takes in the child before its exec:
// every id the user's, so no capability is left and none can come back (a saved uid 0 would
// let it), and no supplementary group.
func userCredential() *syscall.Credential {
	return &syscall.Credential{Uid: userUID, Gid: userUID, Groups: []uint32{}}
}

// withoutInheritable runs fork with the calling thread's inheritable capabilities emptied, as
// the user's processes must have them: setresuid keeps that set, and the child cannot be given
// code of ours to empty it, so it inherits the thread's. The thread's set comes back after.
func withoutInheritable(fork func() error) error {
	var saved [2]capData
	if err := threadCapabilities(&saved, false); err != nil {
		return err
	}
	if saved[0].inheritable == 0 && saved[1].inheritable == 0 {
		return fork()
	}
	emptied := saved
	emptied[0].inheritable, emptied[1].inheritable = 0, 0
	if err := threadCapabilities(&emptied, true); err != nil {
		return err
	}
	defer func() {
		if err := threadCapabilities(&saved, true); err != nil {
			panic("cannot restore the inheritable capabilities: " + err.Error())
		}
	}()
	return fork()
}

// lookupID is the entry of /etc/passwd or /etc/group for a numeric id, split at its colons:
// the first line that names it, as the C library's files source reads them.
func lookupID(file string, id int) ([]string, bool) {
	content, err := readSmallFile(file)
	if err != nil {
		return nil, false
	}
	for _, line := range strings.Split(string(content), "\n") {
		fields := strings.Split(line, ":")
		if line == "" || line[0] == '#' || len(fields) < 3 {
			continue
		}
		if number, err := strconv.ParseUint(fields[2], 10, 32); err == nil && int(number) == id {
			return fields, true
		}
	}
	return nil, false
}

// names are owner and group names, looked up once each, the number itself when there is none.
var names = map[string]map[uint32]string{"/etc/passwd": {}, "/etc/group": {}}

func nameOf(file string, id uint32) string {
	cache := names[file]
	if name, ok := cache[id]; ok {
		return name
	}
	name := strconv.FormatUint(uint64(id), 10)
	if fields, ok := lookupID(file, int(id)); ok {
		name = fields[0]
	}
	cache[id] = name
	return name
}
