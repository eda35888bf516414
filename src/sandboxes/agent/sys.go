package main

// System calls the syscall package leaves out (the *at family with flags, the l- and f-
// variants of the xattr calls, poll, per-thread credentials and capabilities), made directly.

import (
	"strings"
	"syscall"
	"unsafe"
)

const (
	atCWD             = -100
	atSymlinkNofollow = 0x100
	atRemoveDir       = 0x200
)

func pathPointer(path string) (*byte, error) {
	if strings.IndexByte(path, 0) >= 0 {
		return nil, syscall.EINVAL
	}
	return syscall.BytePtrFromString(path)
}

func errnoErr(errno syscall.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}

func fstatat(dirfd int, path string, info *syscall.Stat_t, flags int) error {
	p, err := pathPointer(path)
	if err != nil {
		return err
	}
	_, _, errno := syscall.Syscall6(syscall.SYS_NEWFSTATAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(info)), uintptr(flags), 0, 0)
	return errnoErr(errno)
}

func unlinkat(dirfd int, path string, flags int) error {
	p, err := pathPointer(path)
	if err != nil {
		return err
	}
	_, _, errno := syscall.Syscall(syscall.SYS_UNLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(flags))
	return errnoErr(errno)
}

func readlinkat(dirfd int, path string) (string, error) {
	p, err := pathPointer(path)
	if err != nil {
		return "", err
	}
	for size := 256; ; size *= 2 {
		buffer := make([]byte, size)
		n, _, errno := syscall.Syscall6(syscall.SYS_READLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&buffer[0])), uintptr(size), 0, 0)
		if errno != 0 {
			return "", errno
		}
		if int(n) < size {
			return string(buffer[:n]), nil
		}
	}
}

type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const (
	pollIn  = 0x1
	pollOut = 0x4
)

// poll waits up to timeout milliseconds (-1: without end); EINTR is the caller's to retry.
func poll(fds []pollFd, timeout int) (int, error) {
	var spec *syscall.Timespec
	if timeout >= 0 {
		spec = &syscall.Timespec{Sec: int64(timeout / 1000), Nsec: int64(timeout%1000) * 1e6}
	}
	var first unsafe.Pointer
	if len(fds) > 0 {
		first = unsafe.Pointer(&fds[0])
	}
	n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(first), uintptr(len(fds)), uintptr(unsafe.Pointer(spec)), 0, 0, 0)
	return int(n), errnoErr(errno)
}

func ioctl(fd int, request uintptr, arg uintptr) error {
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), request, arg)
	return errnoErr(errno)
}

func fcntl(fd int, command int, arg int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(command), uintptr(arg))
	return int(r), errnoErr(errno)
}

func prctl(option, arg uintptr) error {
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, option, arg, 0, 0, 0, 0)
	return errnoErr(errno)
}

// setEffectiveIDs changes the effective uid or gid of the calling thread alone (the raw call;
// the C library's, like syscall.Setresuid, changes every thread's). -1 leaves one as it is.
func setEffectiveIDs(call uintptr, id int) error {
	_, _, errno := syscall.RawSyscall(call, ^uintptr(0), uintptr(id), ^uintptr(0))
	return errnoErr(errno)
}

type capHeader struct {
	version uint32
	pid     int32
}

type capData struct {
	effective, permitted, inheritable uint32
}

const linuxCapabilityVersion3 = 0x20080522

// threadCapabilities reads (set false) or sets the calling thread's capability sets.
func threadCapabilities(data *[2]capData, set bool) error {
	header := capHeader{version: linuxCapabilityVersion3}
	call := uintptr(syscall.SYS_CAPGET)
	if set {
		call = syscall.SYS_CAPSET
	}
	_, _, errno := syscall.RawSyscall(call, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0)
	return errnoErr(errno)
}

// xattrNames lists the extended attributes of a link itself (fd < 0) or of an open file.
func xattrNames(path string, fd int) ([]string, error) {
	var p *byte
	if fd < 0 {
		var err error
		if p, err = pathPointer(path); err != nil {
			return nil, err
		}
	}
	call := func(buffer []byte) (int, error) {
		var at unsafe.Pointer
		if len(buffer) > 0 {
			at = unsafe.Pointer(&buffer[0])
		}
		var n uintptr
		var errno syscall.Errno
		if fd < 0 {
			n, _, errno = syscall.Syscall(syscall.SYS_LLISTXATTR, uintptr(unsafe.Pointer(p)), uintptr(at), uintptr(len(buffer)))
		} else {
			n, _, errno = syscall.Syscall(syscall.SYS_FLISTXATTR, uintptr(fd), uintptr(at), uintptr(len(buffer)))
		}
		return int(n), errnoErr(errno)
	}
	buffer, err := sized(call)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, name := range strings.Split(string(buffer), "\x00") {
		if name != "" {
			names = append(names, name)
		}
	}
	return names, nil
}

// xattrValue reads one attribute of a link itself.
func xattrValue(path, name string) ([]byte, error) {
	p, err := pathPointer(path)
	if err != nil {
		return nil, err
	}
	n, err := pathPointer(name)
	if err != nil {
		return nil, err
	}
	return sized(func(buffer []byte) (int, error) {
		var at unsafe.Pointer
		if len(buffer) > 0 {
			at = unsafe.Pointer(&buffer[0])
		}
		r, _, errno := syscall.Syscall6(syscall.SYS_LGETXATTR, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(n)), uintptr(at), uintptr(len(buffer)), 0, 0)
		return int(r), errnoErr(errno)
	})
}

// sized calls a get-into-buffer call with the size it asks for, again while that grows meanwhile.
func sized(call func([]byte) (int, error)) ([]byte, error) {
	for {
		size, err := call(nil)
		if err != nil {
			return nil, err
		}
		buffer := make([]byte, size)
		n, err := call(buffer)
		if err == syscall.ERANGE {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buffer[:n], nil
	}
}

func fremovexattr(fd int, name string) error {
	n, err := pathPointer(name)
	if err != nil {
		return err
	}
	_, _, errno := syscall.Syscall(syscall.SYS_FREMOVEXATTR, uintptr(fd), uintptr(unsafe.Pointer(n)), 0)
	return errnoErr(errno)
}

func fsetxattr(fd int, name string, value []byte) error {
	n, err := pathPointer(name)
	if err != nil {
		return err
	}
	var at unsafe.Pointer
	if len(value) > 0 {
		at = unsafe.Pointer(&value[0])
	}
	_, _, errno := syscall.Syscall6(syscall.SYS_FSETXATTR, uintptr(fd), uintptr(unsafe.Pointer(n)), uintptr(at), uintptr(len(value)), 0, 0)
	return errnoErr(errno)
}

type dirEntry struct {
	name  string
	dtype uint8
}

const (
	dtUnknown = 0
	dtDir     = 4
)

// readDir lists an open directory from where its offset stands, "." and ".." left out.
func readDir(fd int) ([]dirEntry, error) {
	var entries []dirEntry
	buffer := make([]byte, 32*1024)
	for {
		n, err := syscall.ReadDirent(fd, buffer)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return entries, nil
		}
		for at := 0; at < n; {
			// struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
			length := int(*(*uint16)(unsafe.Pointer(&buffer[at+16])))
			kind := buffer[at+18]
			name := buffer[at+19 : at+length]
			if end := strings.IndexByte(string(name), 0); end >= 0 {
				name = name[:end]
			}
			at += length
			if text := string(name); text != "." && text != ".." {
				entries = append(entries, dirEntry{name: text, dtype: kind})
			}
		}
	}
}

// isDir is python's DirEntry.is_dir(follow_symlinks=False): the type the directory gives,
// else the entry's own lstat; false when it is gone.
func (e dirEntry) isDir(dirfd int) bool {
	if e.dtype != dtUnknown {
		return e.dtype == dtDir
	}
	var info syscall.Stat_t
	return fstatat(dirfd, e.name, &info, atSymlinkNofollow) == nil && info.Mode&syscall.S_IFMT == syscall.S_IFDIR
}

// readSmallFile reads a file of /proc or /etc whole.
func readSmallFile(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var content []byte
	buffer := make([]byte, 4096)
	for {
		n, err := syscall.Read(fd, buffer)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return content, nil
		}
		content = append(content, buffer[:n]...)
	}
}

// writeAll writes every byte, however many calls the descriptor takes.
func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := syscall.Write(fd, data)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}
