package main

// Entries: what the file operations say of one file (kind, mode string, owner names, a link's
// target, envd's metadata in user.e2b.* attributes), read with lstat: a link is never followed.

import (
	"strconv"
	"strings"
	"syscall"
)

// metadataXattr is envd's file metadata: extended attributes in this namespace, prefix cut.
const metadataXattr = "user.e2b."

func entryOf(path string) (members, error) {
	var info syscall.Stat_t
	if err := syscall.Lstat(path, &info); err != nil {
		return nil, named(err, path)
	}
	kind := "other"
	switch info.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		kind = "file"
	case syscall.S_IFDIR:
		kind = "directory"
	case syscall.S_IFLNK:
		kind = "symlink"
	}
	name := basename(path)
	if name == "" {
		name = path
	}
	entry := members{
		{"name", name},
		{"path", path},
		{"type", kind},
		{"size", info.Size},
		{"mode", int64(info.Mode & 0o7777)},
		{"permissions", filemode(info.Mode)},
		{"owner", nameOf("/etc/passwd", info.Uid)},
		{"group", nameOf("/etc/group", info.Gid)},
		{"modified_ms", float{float64(info.Mtim.Sec*1e9+info.Mtim.Nsec) / 1e6}},
	}
	if kind == "symlink" {
		target, err := linkTarget(path)
		if err != nil {
			return nil, err
		}
		entry = append(entry, kv{"symlink_target", target})
	}
	if metadata := metadataOf(path); len(metadata.keys) > 0 {
		entry = append(entry, kv{"metadata", metadata})
	}
	return entry, nil
}

// filemode is `ls -l`'s mode string, as python's stat.filemode writes it.
func filemode(mode uint32) string {
	kind := byte('?')
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		kind = '-'
	case syscall.S_IFDIR:
		kind = 'd'
	case syscall.S_IFLNK:
		kind = 'l'
	case syscall.S_IFSOCK:
		kind = 's'
	case syscall.S_IFIFO:
		kind = 'p'
	case syscall.S_IFCHR:
		kind = 'c'
	case syscall.S_IFBLK:
		kind = 'b'
	}
	text := []byte{kind}
	triple := func(shift uint, special uint32, set, unset byte) {
		bits := mode >> shift
		text = append(text, "-r"[bits>>2&1], "-w"[bits>>1&1])
		switch {
		case mode&special != 0 && bits&1 != 0:
			text = append(text, set)
		case mode&special != 0:
			text = append(text, unset)
		default:
			text = append(text, "-x"[bits&1])
		}
	}
	triple(6, syscall.S_ISUID, 's', 'S')
	triple(3, syscall.S_ISGID, 's', 'S')
	triple(0, syscall.S_ISVTX, 't', 'T')
	return string(text)
}

// linkTarget is where a link leads, as an absolute path (envd's EvalSymlinks): to its end when
// the chain resolves, else the link's own target, taken against the link's directory.
func linkTarget(path string) (string, error) {
	if resolved, err := realpath(path); err == nil {
		return resolved, nil
	}
	target, err := readlinkat(atCWD, path)
	if err != nil {
		return "", named(err, path)
	}
	return normpath(join(dirname(path), target)), nil
}

// metadataOf is the file's metadata; none where the file system keeps no extended attributes.
func metadataOf(path string) *object {
	metadata := newObject()
	list, err := xattrNames(path, -1)
	if err != nil {
		return metadata
	}
	for _, name := range list {
		if !strings.HasPrefix(name, metadataXattr) {
			continue
		}
		value, err := xattrValue(path, name)
		if err != nil {
			return newObject()
		}
		metadata.set(name[len(metadataXattr):], asciiOrReplacement(value))
	}
	return metadata
}

// asciiOrReplacement is python's bytes.decode("ascii", "replace").
func asciiOrReplacement(value []byte) string {
	var text strings.Builder
	for _, c := range value {
		if c < 0x80 {
			text.WriteByte(c)
		} else {
			text.WriteString("\uFFFD")
		}
	}
	return text.String()
}

func printableASCII(text string) bool {
	for i := 0; i < len(text); i++ {
		if text[i] < 0x20 || text[i] > 0x7e {
			return false
		}
	}
	return true
}

// metadataField is a write's `metadata`: printable ASCII keys and values, or none.
func metadataField(r request) (*object, error) {
	metadata, err := r.dict("metadata", true)
	if err != nil || metadata == nil {
		return newObject(), err
	}
	for _, key := range metadata.keys {
		value, ok := metadata.values[key].(string)
		if !ok || !printableASCII(key) || !printableASCII(value) {
			return nil, invalid("metadata: keys and values must be printable ASCII")
		}
	}
	return metadata, nil
}

// setMetadata makes the open file's metadata exactly `metadata` (envd: an upload replaces what
// it had). A file system without extended attributes has none to remove, and refuses some to set.
func setMetadata(fd int, metadata *object) error {
	err := func() error {
		list, err := xattrNames("", fd)
		if err != nil {
			return err
		}
		for _, name := range list {
			if strings.HasPrefix(name, metadataXattr) {
				if err := fremovexattr(fd, name); err != nil {
					return err
				}
			}
		}
		for _, key := range metadata.keys {
			if err := fsetxattr(fd, metadataXattr+key, []byte(metadata.values[key].(string))); err != nil {
				return err
			}
		}
		return nil
	}()
	if err == nil {
		return nil
	}
	if !isErrno(err, syscall.ENOTSUP, syscall.EOPNOTSUPP) {
		// python names the descriptor where it names a path.
		return named(err, strconv.Itoa(fd))
	}
	if len(metadata.keys) > 0 {
		return invalid("metadata: this sandbox's file system keeps no extended attributes")
	}
	return nil
}
