package main

// Pseudo-terminals for the processes started with one: openpty and the window size.

import (
	"strconv"
	"syscall"
	"unsafe"
)

// tiocgptpeer opens a terminal's other side from its master (Linux 4.13): no path under
// /dev/pts, which may be another devpts than the master's.
const tiocgptpeer = 0x5441

// openpty is the C library's openpty: a new terminal from /dev/ptmx, unlocked, and its other
// side, both kept from the processes the agent starts.
func openpty() (master, terminal int, err error) {
	master, err = syscall.Open("/dev/ptmx", syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, -1, err
	}
	unlock := int32(0)
	if err := ioctl(master, syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); err != nil {
		syscall.Close(master)
		return -1, -1, err
	}
	peer, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(master), tiocgptpeer, syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC)
	if errno == 0 {
		return master, int(peer), nil
	}
	var number uint32
	if err := ioctl(master, syscall.TIOCGPTN, uintptr(unsafe.Pointer(&number))); err != nil {
		syscall.Close(master)
		return -1, -1, err
	}
	terminal, err = syscall.Open("/dev/pts/"+strconv.FormatUint(uint64(number), 10), syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Close(master)
		return -1, -1, err
	}
	return master, terminal, nil
}

// setWindowSize gives a terminal its size; the kernel signals its foreground group.
func setWindowSize(fd int, rows, cols int64) error {
	size := struct{ rows, cols, xpixels, ypixels uint16 }{uint16(rows), uint16(cols), 0, 0}
	return ioctl(fd, syscall.TIOCSWINSZ, uintptr(unsafe.Pointer(&size)))
}
