package main

// Opening a file under a root and never outside it (a read or write that names a `root`:
// files.go filePath), one component at a time from directory descriptors the walk holds.

import (
	"strings"
	"syscall"
)

// Links followed on the way to one file under a root, as the kernel's own limit (MAXSYMLINKS).
const maxLinks = 40

// openBeneath opens `path`, relative to the directory `root`, as the kernel would, but never
// outside `root`: each component is opened from the directory fd before it and never through
// a link; a link met is read and its target walked the same way (relative, or absolute under
// `root`), and one that would lead out of `root` (an absolute target elsewhere, `..` above it)
// is refused. The walk only descends from fds it holds and goes up by dropping them, so
// nothing the sandbox's code swaps meanwhile leads it out. With makeParents, missing
// directories on the way are made. Returns an fd of a regular file (openRegular).
func openBeneath(root, path string, flags int, makeParents bool) (int, error) {
	top, err := syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, named(err, root)
	}
	held := []int{top}
	defer func() {
		for _, fd := range held {
			syscall.Close(fd)
		}
	}()
	// pending holds the components still to walk, the next one last.
	var pending []string
	push := func(target string) {
		parts := strings.Split(target, "/")
		for i := len(parts) - 1; i >= 0; i-- {
			pending = append(pending, parts[i])
		}
	}
	push(path)
	links := 0
	for len(pending) > 0 {
		name := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			if len(held) == 1 {
				return -1, refuse("path_escape", "%s leads out of %s", path, root)
			}
			syscall.Close(held[len(held)-1])
			held = held[:len(held)-1]
			continue
		}
		fd, err := openComponent(held[len(held)-1], name, flags, len(pending) == 0)
		if err == nil {
			if len(pending) == 0 {
				return fd, nil
			}
			held = append(held, fd)
			continue
		}
		if isErrno(err, syscall.ENOENT) {
			if !(makeParents && len(pending) > 0) {
				return -1, err
			}
			if err := syscall.Mkdirat(held[len(held)-1], name, 0o777); err != nil && err != syscall.EEXIST {
				// made meanwhile: opened on the next turn, whatever it is
				return -1, named(err, name)
			}
			pending = append(pending, name)
			continue
		}
		if _, refused := err.(*refusal); refused {
			return -1, err
		}
		// A link, or something that is not a directory (said as the kernel says it).
		target, linkErr := readlinkat(held[len(held)-1], name)
		if linkErr != nil {
			return -1, err
		}
		links++
		if links > maxLinks {
			return -1, named(syscall.ELOOP, path)
		}
		if strings.HasPrefix(target, "/") {
			parts := components(target)
			under := components(root)
			if len(parts) < len(under) || strings.Join(parts[:len(under)], "/") != strings.Join(under, "/") {
				return -1, refuse("path_escape", "%s leads out of %s (a link to %s)", path, root, target)
			}
			for _, fd := range held[1:] {
				syscall.Close(fd)
			}
			held = held[:1]
			target = strings.Join(parts[len(under):], "/")
		}
		push(target)
	}
	return -1, named(syscall.EISDIR, path)
}

// components are a path's names, without the empty ones and ".".
func components(path string) []string {
	var parts []string
	for _, part := range strings.Split(path, "/") {
		if part != "" && part != "." {
			parts = append(parts, part)
		}
	}
	return parts
}

// openComponent opens one name under dirfd without following it: the file itself when it is
// the last, else a directory to walk on from.
func openComponent(dirfd int, name string, flags int, last bool) (int, error) {
	if last {
		return openRegular(dirfd, name, flags|syscall.O_NOFOLLOW)
	}
	// Not O_DIRECTORY: with it, gVisor (runsc 20221219) follows a link despite O_NOFOLLOW.
	fd, err := syscall.Openat(dirfd, name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, named(err, name)
	}
	var info syscall.Stat_t
	if err := syscall.Fstat(fd, &info); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if info.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		syscall.Close(fd)
		return -1, named(syscall.ENOTDIR, name)
	}
	return fd, nil
}
