package main

// Paths are handled as python's posixpath handles them (normpath keeps a leading "//", join
// restarts at an absolute part, realpath walks links one component at a time): the paths the
// agent reports are those the wire has always carried.

import (
	"os"
	"strings"
	"syscall"
)

func normpath(path string) string {
	if path == "" {
		return "."
	}
	initial := 0
	if strings.HasPrefix(path, "/") {
		initial = 1
		if strings.HasPrefix(path, "//") && !strings.HasPrefix(path, "///") {
			initial = 2
		}
	}
	var parts []string
	for _, part := range strings.Split(path, "/") {
		switch {
		case part == "" || part == ".":
		case part != ".." || (initial == 0 && len(parts) == 0) || (len(parts) > 0 && parts[len(parts)-1] == ".."):
			parts = append(parts, part)
		case len(parts) > 0:
			parts = parts[:len(parts)-1]
		}
	}
	joined := strings.Repeat("/", initial) + strings.Join(parts, "/")
	if joined == "" {
		return "."
	}
	return joined
}

func join(base string, parts ...string) string {
	path := base
	for _, part := range parts {
		switch {
		case strings.HasPrefix(part, "/"):
			path = part
		case path == "" || strings.HasSuffix(path, "/"):
			path += part
		default:
			path += "/" + part
		}
	}
	return path
}

// split is posixpath.split: the head without its trailing slashes (unless all slashes), the tail.
func split(path string) (string, string) {
	i := strings.LastIndexByte(path, '/') + 1
	head, tail := path[:i], path[i:]
	if head != "" && head != strings.Repeat("/", len(head)) {
		head = strings.TrimRight(head, "/")
	}
	return head, tail
}

func dirname(path string) string {
	head, _ := split(path)
	return head
}

func basename(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// home is where relative paths start and processes run by default: $HOME as the agent was
// given it, else the agent's user's home, else /.
func home() string {
	if value := os.Getenv("HOME"); value != "" {
		return value
	}
	if user, ok := lookupID("/etc/passwd", syscall.Getuid()); ok && len(user) > 5 {
		return user[5]
	}
	return "/"
}

func resolve(value any) (string, error) {
	path, ok := value.(string)
	if !ok || path == "" {
		return "", invalid("path: expected a non-empty string")
	}
	return normpath(join(home(), path)), nil
}

// realpath is posixpath.realpath(path, strict=True): every link on the way followed, any
// component that cannot be looked at an error.
func realpath(path string) (string, error) {
	resolved, err := joinRealpath("", path, map[string]*string{})
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(resolved, "/") {
		cwd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		resolved = join(cwd, resolved)
	}
	return normpath(resolved), nil
}

func joinRealpath(path, rest string, seen map[string]*string) (string, error) {
	if strings.HasPrefix(rest, "/") {
		rest = rest[1:]
		path = "/"
	}
	for rest != "" {
		var name string
		name, rest, _ = strings.Cut(rest, "/")
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			if path != "" {
				var last string
				path, last = split(path)
				if last == ".." {
					path = join(path, "..", "..")
				}
			} else {
				path = ".."
			}
			continue
		}
		next := join(path, name)
		var info syscall.Stat_t
		if err := syscall.Lstat(next, &info); err != nil {
			return "", named(err, next)
		}
		if info.Mode&syscall.S_IFMT != syscall.S_IFLNK {
			path = next
			continue
		}
		if known, ok := seen[next]; ok {
			if known != nil {
				path = *known
				continue
			}
			// A loop: said as the kernel says it.
			err := syscall.Stat(next, &info)
			if err == nil {
				err = syscall.ELOOP
			}
			return "", named(err, next)
		}
		seen[next] = nil
		target, err := readlinkat(atCWD, next)
		if err != nil {
			return "", named(err, next)
		}
		resolved, err := joinRealpath(path, target, seen)
		if err != nil {
			return "", err
		}
		path = resolved
		seen[next] = &resolved
	}
	return path, nil
}
