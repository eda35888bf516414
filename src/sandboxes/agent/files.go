package main

// The file operations (stat, mkdir, move, list_dir, remove, read, write), each run as the user
// its request names (users.go, loop.go perform).

import (
	"sort"
	"strings"
	"syscall"
)

const (
	// A `read` answers at most this much, whatever it asked: a reply stays well under the
	// host's frame limit.
	readChunk = 4 * 1024 * 1024
	// A listing answers at most this many entries, and this many bytes of them: its reply is
	// one frame, which must stay under the host's limit (64 MiB) whatever the tree.
	maxListEntries = 100_000
	maxListBytes   = 32 * 1024 * 1024
)

func opStat(a *agent, r request) (members, error) {
	path, err := resolve(r.lookup("path"))
	if err != nil {
		return nil, err
	}
	entry, err := entryOf(path)
	if err != nil {
		return nil, err
	}
	return members{{"entry", entry}}, nil
}

func isDir(path string) bool {
	var info syscall.Stat_t
	return syscall.Stat(path, &info) == nil && info.Mode&syscall.S_IFMT == syscall.S_IFDIR
}

func exists(path string, follow bool) bool {
	var info syscall.Stat_t
	if follow {
		return syscall.Stat(path, &info) == nil
	}
	return syscall.Lstat(path, &info) == nil
}

func opMkdir(a *agent, r request) (members, error) {
	path, err := resolve(r.lookup("path"))
	if err != nil {
		return nil, err
	}
	made := func(created bool) (members, error) {
		entry, err := entryOf(path)
		if err != nil {
			return nil, err
		}
		return members{{"entry", entry}, {"created", created}}, nil
	}
	if isDir(path) {
		return made(false)
	}
	if exists(path, false) {
		return nil, named(syscall.EEXIST, path)
	}
	err = makedirs(path, false)
	if isErrno(err, syscall.EACCES) && mayMakeForUser(r) {
		err = asRootAgain(func() error { return makeDirsForUser(path) })
	}
	if err != nil {
		if !isErrno(err, syscall.EEXIST) || !isDir(path) {
			return nil, err
		}
		return made(false)
	}
	return made(true)
}

// makedirs is python's os.makedirs: the missing parents first, each made as the kernel allows.
func makedirs(name string, existOK bool) error {
	head, tail := split(name)
	if tail == "" {
		head, tail = split(head)
	}
	if head != "" && tail != "" && !exists(head, true) {
		if err := makedirs(head, existOK); err != nil && !isErrno(err, syscall.EEXIST) {
			return err
		}
		if tail == "." {
			return nil
		}
	}
	if err := syscall.Mkdir(name, 0o777); err != nil {
		if !existOK || !isDir(name) {
			return named(err, name)
		}
	}
	return nil
}

// mayMakeForUser: a request as the user whose directories the user may not make (one at /, say)
// has them made as E2B's envd makes them, which runs as root: by root, each then given to the
// user. Only with root inside, where the user is one of two in the sandbox, never the host's.
func mayMakeForUser(r request) bool {
	user, err := userOf(r)
	return err == nil && rootInside && user == "user"
}

// makeDirsForUser makes each missing directory of dir, as root, 0755 and the user's. The walk
// opens each component from the one before it and follows no link, so a link the user planted
// cannot lead root's mkdir elsewhere.
func makeDirsForUser(dir string) error {
	fd, err := syscall.Open("/", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	walked := ""
	for _, name := range strings.Split(dir, "/") {
		if name == "" || name == "." {
			continue
		}
		walked += "/" + name
		if name == ".." {
			syscall.Close(fd)
			return invalid(dir + ": a path with ..")
		}
		const flags = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
		next, err := syscall.Openat(fd, name, flags, 0)
		if isErrno(err, syscall.ENOENT) {
			if err = syscall.Mkdirat(fd, name, 0o755); err == nil || isErrno(err, syscall.EEXIST) {
				next, err = openOwned(fd, name, flags, err == nil)
			}
		}
		syscall.Close(fd)
		if err != nil {
			return named(err, walked)
		}
		fd = next
	}
	syscall.Close(fd)
	return nil
}

// openOwned opens name in dir, given to the user first when made is true (a directory root made for it).
func openOwned(dir int, name string, flags int, made bool) (int, error) {
	fd, err := syscall.Openat(dir, name, flags, 0)
	if err == nil && made {
		if err = syscall.Fchown(fd, userUID, userUID); err != nil {
			syscall.Close(fd)
		}
	}
	return fd, err
}

// makeParentsFor makes the directories a file at path needs, as the request's user may, or as
// mayMakeForUser says.
func makeParentsFor(r request, path string) error {
	err := makeParents(path)
	if isErrno(err, syscall.EACCES) && mayMakeForUser(r) {
		return asRootAgain(func() error { return makeDirsForUser(dirname(path)) })
	}
	return err
}

// makeParents makes the directories a file at path needs.
func makeParents(path string) error {
	parent := dirname(path)
	if err := makedirs(parent, true); err != nil {
		if isErrno(err, syscall.EEXIST) {
			// Something that is not a directory stands where a parent should be.
			return named(syscall.ENOTDIR, parent)
		}
		return err
	}
	return nil
}

func opMove(a *agent, r request) (members, error) {
	source, err := resolve(r.lookup("source"))
	if err != nil {
		return nil, err
	}
	destination, err := resolve(r.lookup("destination"))
	if err != nil {
		return nil, err
	}
	var info syscall.Stat_t
	if err := syscall.Lstat(source, &info); err != nil {
		return nil, named(err, source)
	}
	if err := makeParents(destination); err != nil {
		return nil, err
	}
	if err := syscall.Rename(source, destination); err != nil {
		return nil, named(err, source)
	}
	entry, err := entryOf(destination)
	if err != nil {
		return nil, err
	}
	return members{{"entry", entry}}, nil
}

// scandir lists a directory by its path; isDir of its entries is looked up through dirfd,
// open until done is called.
func scandir(path string) (entries []dirEntry, dirfd int, err error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, -1, named(err, path)
	}
	entries, err = readDir(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, -1, named(err, path)
	}
	return entries, fd, nil
}

type listing struct {
	root    string
	depth   int64
	entries []members
	paths   []string
	size    int
}

func (l *listing) walk(directory string, level int64) error {
	children, dirfd, err := scandir(directory)
	if err != nil {
		if level == 1 {
			return err
		}
		return nil // a subdirectory it may not read: listed, not entered
	}
	defer syscall.Close(dirfd)
	for _, child := range children {
		path := join(directory, child.name)
		entry, err := entryOf(path)
		if err != nil {
			continue // gone since the directory was read
		}
		l.entries = append(l.entries, entry)
		l.paths = append(l.paths, path)
		measure := encoder{spaced: true}
		measure.value(entry)
		l.size += len(measure.out)
		if len(l.entries) > maxListEntries || l.size > maxListBytes {
			return refuse("too_large", "%s holds more than %d entries (or %d bytes of them) to depth %d: list less deep", l.root, maxListEntries, maxListBytes, l.depth)
		}
		if level < l.depth && child.isDir(dirfd) {
			if err := l.walk(path, level+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func opListDir(a *agent, r request) (members, error) {
	path, err := resolve(r.lookup("path"))
	if err != nil {
		return nil, err
	}
	depth, err := r.count("depth", 1, noMaximum)
	if err != nil {
		return nil, err
	}
	l := &listing{root: path, depth: depth.value}
	if err := l.walk(path, 1); err != nil {
		return nil, err
	}
	order := make([]int, len(l.entries))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(x, y int) bool { return pythonLess(l.paths[order[x]], l.paths[order[y]]) })
	entries := make([]any, len(order))
	for i, index := range order {
		entries[i] = l.entries[index]
	}
	return members{{"entries", entries}}, nil
}

func opRemove(a *agent, r request) (members, error) {
	path, err := resolve(r.lookup("path"))
	if err != nil {
		return nil, err
	}
	var info syscall.Stat_t
	if err := syscall.Lstat(path, &info); err != nil {
		return nil, named(err, path)
	}
	if info.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		err = rmtree(path)
	} else if err = syscall.Unlink(path); err != nil {
		err = named(err, path)
	}
	if err != nil {
		return nil, err
	}
	return members{}, nil
}

// rmtree is python's shutil.rmtree on descriptors: each directory opened from its parent's
// descriptor and checked to be what was listed, so it never follows a link out of the tree.
func rmtree(path string) error {
	var listed syscall.Stat_t
	if err := syscall.Lstat(path, &listed); err != nil {
		return named(err, path)
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return named(err, path)
	}
	if err := rmtreeFrom(fd, path, &listed); err != nil {
		syscall.Close(fd)
		return err
	}
	syscall.Close(fd)
	if err := unlinkat(atCWD, path, atRemoveDir); err != nil {
		return named(err, path)
	}
	return nil
}

func sameFile(a, b *syscall.Stat_t) bool { return a.Ino == b.Ino && a.Dev == b.Dev }

// rmtreeFrom empties the open directory fd, which must be the one listed as `listed`.
func rmtreeFrom(fd int, path string, listed *syscall.Stat_t) error {
	var opened syscall.Stat_t
	if err := syscall.Fstat(fd, &opened); err != nil {
		return err
	}
	if !sameFile(listed, &opened) {
		return &refusal{code: "failed", message: "Cannot call rmtree on a symbolic link"}
	}
	// python lists a copy of the descriptor, from its start.
	copyfd, err := fcntl(fd, syscall.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	children, err := readDir(copyfd)
	syscall.Close(copyfd)
	if err != nil {
		return named(err, path)
	}
	for _, child := range children {
		full := join(path, child.name)
		var info syscall.Stat_t
		directory := child.isDir(fd)
		if directory {
			if err := fstatat(fd, child.name, &info, atSymlinkNofollow); err != nil {
				return named(err, child.name)
			}
			directory = info.Mode&syscall.S_IFMT == syscall.S_IFDIR
		}
		if !directory {
			if err := unlinkat(fd, child.name, 0); err != nil {
				return named(err, child.name)
			}
			continue
		}
		dirfd, err := syscall.Openat(fd, child.name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return named(err, child.name)
		}
		err = rmtreeFrom(dirfd, full, &info)
		syscall.Close(dirfd)
		if err != nil {
			return err
		}
		if err := unlinkat(fd, child.name, atRemoveDir); err != nil {
			return named(err, child.name)
		}
	}
	return nil
}

// filePath is a read's or write's path and the root it must stay under ("": the sandbox as its
// user sees it). Under a root the path is relative to it, and resolved by openBeneath.
func filePath(r request) (path, beneath string, err error) {
	beneath, given, err := r.optionalText("beneath")
	if err != nil {
		return "", "", err
	}
	if !given {
		path, err := resolve(r.lookup("path"))
		return path, "", err
	}
	if path, err = r.text("path"); err != nil {
		return "", "", err
	}
	if len(beneath) == 0 || beneath[0] != '/' || path == "" || path[0] == '/' {
		return "", "", invalid("beneath: an absolute directory, and path relative to it")
	}
	return path, beneath, nil
}

// openRegular opens a file to read or write, refusing what is not a regular file: opened
// without O_NONBLOCK, a FIFO the sandbox's code made would hold the agent until something used
// its other end, and a device such as /dev/zero never ends.
func openRegular(dirfd int, path string, flags int) (int, error) {
	notRegular := refuse("not_regular", "%s: not a regular file (a FIFO, socket or device)", path)
	fd, err := syscall.Openat(dirfd, path, flags|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0o666)
	if err != nil {
		if isErrno(err, syscall.ENXIO, syscall.ENODEV) {
			return -1, notRegular
		}
		return -1, named(err, path)
	}
	var info syscall.Stat_t
	if err := syscall.Fstat(fd, &info); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	switch info.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return fd, nil
	case syscall.S_IFDIR:
		syscall.Close(fd)
		return -1, named(syscall.EISDIR, path)
	}
	syscall.Close(fd)
	return -1, notRegular
}

func opRead(a *agent, r request) (members, error) {
	path, beneath, err := filePath(r)
	if err != nil {
		return nil, err
	}
	offset, err := r.count("offset", 0, noMaximum)
	if err != nil {
		return nil, err
	}
	length, err := r.count("length", 1, noMaximum)
	if err != nil {
		return nil, err
	}
	size := length.value
	if size > readChunk {
		size = readChunk
	}
	var fd int
	if beneath != "" {
		fd, err = openBeneath(beneath, path, syscall.O_RDONLY, false)
	} else {
		fd, err = openRegular(atCWD, path, syscall.O_RDONLY)
	}
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	if offset.overflow {
		// python's own words for an offset no system call takes
		return nil, refuse("failed", "OverflowError: Python int too large to convert to C long")
	}
	var info syscall.Stat_t
	if err := syscall.Fstat(fd, &info); err != nil {
		return nil, err
	}
	data := make([]byte, size)
	n, err := syscall.Pread(fd, data, offset.value)
	if err != nil {
		return nil, err
	}
	data = data[:n]
	// A short read ends any file; a regular file also ends at its size (files of /proc say
	// size 0 and have content).
	eof := int64(n) < size || (info.Mode&syscall.S_IFMT == syscall.S_IFREG && info.Size > 0 && offset.value+int64(n) >= info.Size)
	return members{{"data", rawBytes(data)}, {"eof", eof}}, nil
}

func opWrite(a *agent, r request) (members, error) {
	path, beneath, err := filePath(r)
	if err != nil {
		return nil, err
	}
	data, err := r.data()
	if err != nil {
		return nil, err
	}
	appending, err := r.boolean("append")
	if err != nil {
		return nil, err
	}
	flags := syscall.O_WRONLY | syscall.O_CREAT | syscall.O_TRUNC
	if appending {
		flags = syscall.O_WRONLY | syscall.O_CREAT | syscall.O_APPEND
	}
	var fd int
	if beneath != "" {
		fd, err = openBeneath(beneath, path, flags, !appending)
	} else {
		if !appending {
			if err := makeParentsFor(r, path); err != nil {
				return nil, err
			}
		}
		fd, err = openRegular(atCWD, path, flags)
	}
	if err != nil {
		return nil, err
	}
	err = func() error {
		defer syscall.Close(fd)
		if !appending {
			metadata, err := metadataField(r)
			if err != nil {
				return err
			}
			if err := setMetadata(fd, metadata); err != nil {
				return err
			}
		}
		return writeAll(fd, data)
	}()
	if err != nil {
		return nil, err
	}
	if beneath != "" {
		path = join(beneath, path)
	}
	entry, err := entryOf(path)
	if err != nil {
		return nil, err
	}
	return members{{"entry", entry}}, nil
}
