package main

// Paths as python's posixpath makes them (paths.go): the paths the wire has always carried.
// Expectations written by python 3.11.

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestJoinRestartsAtAnAbsolutePart(t *testing.T) {
	for _, c := range []struct {
		parts []string
		path  string
	}{
		{[]string{"a", "b"}, "a/b"},
		{[]string{"a/", "b"}, "a/b"},
		{[]string{"a", "/b", "c"}, "/b/c"},
		{[]string{"", "b"}, "b"},
		{[]string{"/a", "b/", "c"}, "/a/b/c"},
	} {
		if got := join(c.parts[0], c.parts[1:]...); got != c.path {
			t.Errorf("join(%q) = %q, python says %q", c.parts, got, c.path)
		}
	}
}

func TestSplit(t *testing.T) {
	for _, c := range []struct{ path, head, tail string }{
		{"//a", "//", "a"},
		{"a/b/", "a/b", ""},
		{"/a//b", "/a", "b"},
		{"///", "///", ""},
		{"a", "", "a"},
		{"/", "/", ""},
		{"", "", ""},
		{"a//", "a", ""},
	} {
		head, tail := split(c.path)
		if head != c.head || tail != c.tail {
			t.Errorf("split(%q) = %q, %q; python says %q, %q", c.path, head, tail, c.head, c.tail)
		}
		if dirname(c.path) != c.head || basename(c.path) != c.tail {
			t.Errorf("dirname, basename of %q: %q, %q", c.path, dirname(c.path), basename(c.path))
		}
	}
}

func TestResolveStartsFromHome(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	for _, c := range []struct{ value, path string }{
		{"a/../b", "/home/u/b"},
		{"/etc//x/", "/etc/x"},
		{"..", "/home"},
	} {
		if got, err := resolve(c.value); err != nil || got != c.path {
			t.Errorf("resolve(%q) = %q, %v; want %q", c.value, got, err, c.path)
		}
	}
	for _, value := range []any{"", nil, 3} {
		if _, err := resolve(value); err == nil || failureOf(err)[0].value != "invalid" {
			t.Errorf("resolve(%#v): %v, want an invalid path", value, err)
		}
	}
}

func TestRealpathFollowsEveryLink(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "real", "inner"), 0o755))
	must(os.Symlink("real", filepath.Join(root, "relative")))
	must(os.Symlink(filepath.Join(root, "relative", "inner"), filepath.Join(root, "chained")))
	must(os.Symlink("loop-b", filepath.Join(root, "loop-a")))
	must(os.Symlink("loop-a", filepath.Join(root, "loop-b")))
	for _, c := range []struct{ path, real string }{
		{root + "/relative", root + "/real"},
		{root + "/chained/../inner", root + "/real/inner"},
		{root + "/relative/./inner/", root + "/real/inner"},
	} {
		if got, err := realpath(c.path); err != nil || got != c.real {
			t.Errorf("realpath(%q) = %q, %v; want %q", c.path, got, err, c.real)
		}
	}
	// strict=True: a missing component is an error, a loop the kernel's.
	if _, err := realpath(root + "/missing/x"); !isErrno(err, syscall.ENOENT) {
		t.Errorf("a missing component: %v", err)
	}
	if _, err := realpath(root + "/loop-a"); !isErrno(err, syscall.ELOOP) {
		t.Errorf("a loop of links: %v", err)
	}
}
