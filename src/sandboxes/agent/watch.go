package main

// Directory watches (watch, unwatch) on inotify, recursive when asked, their events reported
// under fsnotify's names.

import (
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"
	"unsafe"
)

const (
	inModify     = 0x2
	inAttrib     = 0x4
	inCloseWrite = 0x8
	inMovedFrom  = 0x40
	inMovedTo    = 0x80
	inCreate     = 0x100
	inDelete     = 0x200
	inDeleteSelf = 0x400
	inMoveSelf   = 0x800
	inQOverflow  = 0x4000
	inIgnored    = 0x8000
	inOnlyDir    = 0x1000000
	inDontFollow = 0x2000000
	inIsDir      = 0x40000000
	// A write is reported once per IN_MODIFY (as fsnotify does); IN_CLOSE_WRITE would repeat it.
	watchMask = inCreate | inMovedTo | inModify | inDelete | inDeleteSelf | inMovedFrom | inMoveSelf | inAttrib | inOnlyDir
)

// fsEventTypes are fsnotify's names for inotify's events, first match wins.
var fsEventTypes = []struct {
	bits uint32
	kind string
}{
	{inCreate | inMovedTo, "create"},
	{inModify | inCloseWrite, "write"},
	{inDelete | inDeleteSelf, "remove"},
	{inMovedFrom | inMoveSelf, "rename"},
	{inAttrib, "chmod"},
}

type watch struct {
	id        int
	root      string
	recursive bool
	// wds are the inotify watches of this watch, each with its directory's path relative to
	// root, in the order they were added.
	wds   map[int]string
	order []int
	user  string
}

func (w *watch) addWD(wd int, relative string) {
	if _, ok := w.wds[wd]; !ok {
		w.order = append(w.order, wd)
	}
	w.wds[wd] = relative
}

// watchDirectory watches `relative` (under the watch's root), and for a recursive watch every
// directory in it, without following links. found, when not nil, collects what the
// directories already held (their relative paths, parents first).
func (a *agent) watchDirectory(w *watch, relative string, found *[]string) error {
	path := w.root
	mask := uint32(watchMask)
	if relative != "" {
		path = join(w.root, relative)
		mask |= inDontFollow
	}
	wd, err := syscall.InotifyAddWatch(a.inotify, path, mask)
	if err != nil {
		return named(err, path)
	}
	w.addWD(wd, relative)
	if a.wdWatches[wd] == nil {
		a.wdWatches[wd] = map[int]bool{}
	}
	a.wdWatches[wd][w.id] = true
	if !w.recursive {
		return nil
	}
	children, dirfd, err := scandir(path)
	if err != nil {
		return nil
	}
	directories := map[string]bool{}
	for _, child := range children {
		directories[child.name] = child.isDir(dirfd)
	}
	syscall.Close(dirfd)
	sort.Slice(children, func(i, j int) bool { return pythonLess(children[i].name, children[j].name) })
	for _, child := range children {
		name := join(relative, child.name)
		if found != nil {
			*found = append(*found, name)
		}
		if directories[child.name] {
			// gone, or not readable: its parent's events still come
			_ = a.watchDirectory(w, name, found)
		}
	}
	return nil
}

func (a *agent) forgetWD(w *watch, wd int, removed bool) {
	if _, ok := w.wds[wd]; ok {
		delete(w.wds, wd)
		for i, other := range w.order {
			if other == wd {
				w.order = append(w.order[:i], w.order[i+1:]...)
				break
			}
		}
	}
	users := a.wdWatches[wd]
	if users == nil {
		return
	}
	delete(users, w.id)
	if len(users) == 0 {
		delete(a.wdWatches, wd)
		if !removed {
			_, _ = syscall.InotifyRmWatch(a.inotify, uint32(wd))
		}
	}
}

func (a *agent) forgetAll(w *watch) {
	for _, wd := range append([]int{}, w.order...) {
		a.forgetWD(w, wd, false)
	}
}

func opWatch(a *agent, r request) (members, error) {
	path, err := resolve(r.lookup("path"))
	if err != nil {
		return nil, err
	}
	recursive, err := r.boolean("recursive")
	if err != nil {
		return nil, err
	}
	if a.inotify < 0 {
		fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
		if err != nil {
			return nil, err
		}
		a.inotify = fd
		a.setReader(fd, a.readInotify)
	}
	a.watchIDs++
	user, err := userOf(r)
	if err != nil {
		return nil, err
	}
	w := &watch{id: a.watchIDs, root: path, recursive: recursive, wds: map[int]string{}, user: user}
	if err := a.watchDirectory(w, "", nil); err != nil {
		a.forgetAll(w)
		return nil, err
	}
	a.watches[w.id] = w
	return members{{"watch", w.id}}, nil
}

func opUnwatch(a *agent, r request) (members, error) {
	id, err := r.count("watch", 1, noMaximum)
	if err != nil {
		return nil, err
	}
	w := a.watches[int(id.value)]
	if w == nil {
		return nil, refuse("not_found", "no watch %s", id.text)
	}
	delete(a.watches, w.id)
	a.forgetAll(w)
	return members{}, nil
}

func (a *agent) readInotify() {
	buffer := make([]byte, 1<<16)
	n, err := syscall.Read(a.inotify, buffer)
	if err == syscall.EAGAIN {
		return
	}
	if err != nil {
		panic(fatal{err})
	}
	const header = 16 // struct inotify_event: wd, mask, cookie, len
	for at := 0; at+header <= n; {
		wd := int(*(*int32)(unsafe.Pointer(&buffer[at])))
		mask := *(*uint32)(unsafe.Pointer(&buffer[at+4]))
		length := int(*(*uint32)(unsafe.Pointer(&buffer[at+12])))
		end := at + header + length
		if end > n {
			end = n
		}
		name := strings.TrimRight(string(buffer[at+header:end]), "\x00")
		at += header + length
		if mask&inQOverflow != 0 {
			continue
		}
		var ids []int
		for id := range a.wdWatches[wd] {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for _, id := range ids {
			a.inotifyEvent(a.watches[id], wd, mask, replaceInvalid(name))
		}
	}
}

func (a *agent) inotifyEvent(w *watch, wd int, mask uint32, name string) {
	relative, ok := w.wds[wd]
	if !ok {
		return
	}
	if mask&inIgnored != 0 {
		a.forgetWD(w, wd, true)
		return
	}
	if mask&(inDeleteSelf|inMoveSelf) != 0 && relative != "" {
		return // a subdirectory's own end is its parent's event already
	}
	path := relative
	if name != "" {
		path = join(relative, name)
	}
	// What a new directory already holds when its watch is added (made with it, as by
	// `mkdir -p a/b && echo > a/b/c`) made no event of its own: reported after the directory.
	var found []string
	if w.recursive && mask&inIsDir != 0 {
		if mask&inMovedFrom != 0 {
			// Out of the tree, or about to come back under another name (IN_MOVED_TO).
			for _, other := range append([]int{}, w.order...) {
				if under := w.wds[other]; under == path || strings.HasPrefix(under, path+"/") {
					a.forgetWD(w, other, false)
				}
			}
		} else if mask&(inCreate|inMovedTo) != 0 {
			// Watched before it is reported: a client that waits for this event then acts
			// inside the directory is seen. As the watch's user, as when it was made: the
			// user's watch enters no directory only root may read.
			_ = actingAs(w.user, func() error { return a.watchDirectory(w, path, &found) })
		}
	}
	for _, kind := range fsEventTypes {
		if mask&kind.bits != 0 {
			a.send(members{{"event", "fs"}, {"watch", w.id}, {"name", path}, {"type", kind.kind}})
			break
		}
	}
	for _, child := range found {
		a.send(members{{"event", "fs"}, {"watch", w.id}, {"name", child}, {"type", "create"}})
	}
}

// replaceInvalid is python's bytes.decode("utf-8", "replace"): each maximal ill-formed part
// becomes one U+FFFD.
func replaceInvalid(text string) string {
	if utf8.ValidString(text) {
		return text
	}
	var out strings.Builder
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r != utf8.RuneError || size > 1 {
			out.WriteString(text[i : i+size])
			i += size
			continue
		}
		out.WriteRune(utf8.RuneError)
		i += illFormedLength(text[i:])
	}
	return out.String()
}

// illFormedLength is how many bytes of text, which starts ill-formed, make its maximal
// subpart: a lead byte and the continuation bytes that could still have completed it.
func illFormedLength(text string) int {
	lead := text[0]
	var need int
	low, high := byte(0x80), byte(0xBF)
	switch {
	case lead >= 0xC2 && lead <= 0xDF:
		need = 1
	case lead >= 0xE0 && lead <= 0xEF:
		need = 2
		if lead == 0xE0 {
			low = 0xA0
		} else if lead == 0xED {
			high = 0x9F
		}
	case lead >= 0xF0 && lead <= 0xF4:
		need = 3
		if lead == 0xF0 {
			low = 0x90
		} else if lead == 0xF4 {
			high = 0x8F
		}
	default:
		return 1
	}
	length := 1
	for length <= need && length < len(text) {
		c := text[length]
		if c < low || c > high {
			break
		}
		low, high = 0x80, 0xBF
		length++
	}
	return length
}
