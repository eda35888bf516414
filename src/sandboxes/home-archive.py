"""A sandbox's home as one tar stream: `pack DIR` writes DIR's tree to stdout, `unpack DIR`
reads one from stdin into DIR.

It runs inside the sandbox, as its root where it has one (else as its user), so it reads and
writes only what the sandbox may: the host never walks a tree the sandbox controls. It is started
as `python3 -I -S -c SOURCE pack|unpack DIR` by src/sandboxes/home-archive.ts through the
sandbox's agent (the stream is the process's stdout, or its stdin, as the agent carries them), or,
to put a gVisor sandbox's home back before a restore, by src/isolation/gvisor/gvisor-sandbox.ts
(runsc run, the archive on its stdin). As root it puts each file back with its owner. It is how a
sandbox's files outlive it (pause with files, snapshots) and reach its copies (fork).

Packing a tree that is still in use (a fork of a running sandbox) must never tear the stream: a
file is stored at the size it had when opened, cut or padded with zeros if it changes meanwhile,
and an entry that vanishes or cannot be read is left out and named on stderr.
"""

import os
import stat
import sys
import tarfile

CHUNK = 1024 * 1024


class Exactly:
    """A file's bytes as exactly `size` of them: cut if it grew, zeros after its end if it shrank."""

    def __init__(self, fd, size, name=""):
        self.fd = fd
        self.left = size
        self.name = name

    def fileno(self):
        return self.fd

    def read(self, wanted):
        wanted = min(wanted, self.left)
        data = os.read(self.fd, wanted) if wanted else b""
        if len(data) < wanted:
            data += bytes(wanted - len(data))
        self.left -= len(data)
        return data


def skipped(path, error):
    sys.stderr.write("home-archive: left out %s: %s\n" % (path, error.strerror or error))


# Extended attributes a sandbox's user may set (E2B's file metadata is `user.e2b.*`), kept as
# GNU tar and bsdtar keep them: a pax header each.
USER_XATTR = "user."
PAX_XATTR = "SCHILY.xattr."


def with_xattrs(info, target):
    """`info` with the user.* extended attributes of `target` (a path or an open fd): none where
    the file system keeps none."""
    # An fd is the file itself; a path is not followed (a link has no user attributes of its own).
    follow = {} if isinstance(target, int) else {"follow_symlinks": False}
    try:
        names = [name for name in os.listxattr(target, **follow) if name.startswith(USER_XATTR)]
        for name in names:
            value = os.getxattr(target, name, **follow)
            info.pax_headers[PAX_XATTR + name] = value.decode("utf-8", "surrogateescape")
    except OSError:
        pass
    return info


def restore_xattrs(member, path):
    for key, value in member.pax_headers.items():
        name = key[len(PAX_XATTR):]
        if not (key.startswith(PAX_XATTR) and name.startswith(USER_XATTR)):
            continue
        try:
            os.setxattr(path, name, value.encode("utf-8", "surrogateescape"), follow_symlinks=False)
        except OSError as error:
            skipped("%s (its attribute %s)" % (path, name), error)


def add_file(archive, path, name):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        # Its type, mode and size from the file opened, not from its name: it may be replaced meanwhile.
        info = with_xattrs(archive.gettarinfo(arcname=name, fileobj=Exactly(fd, 0, path)), fd)
        archive.addfile(info, Exactly(fd, info.size))
    finally:
        os.close(fd)


def on_device(path, device):
    """Whether `path` is on the file system `device` (one that cannot be looked at is kept, to be
    named when it is read)."""
    try:
        return os.lstat(path).st_dev == device
    except OSError:
        return True


def pack(home):
    # Another file system mounted in the home (a volume) is not the home's: it outlives the sandbox
    # on its own, and its files coming back into the home would be written into it again.
    device = os.lstat(home).st_dev
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        for top, dirs, files in os.walk(home, onerror=lambda error: skipped(error.filename, error)):
            dirs[:] = sorted(entry for entry in dirs if on_device(os.path.join(top, entry), device))
            for entry in dirs + sorted(files):
                path = os.path.join(top, entry)
                name = os.path.relpath(path, home)
                try:
                    mode = os.lstat(path).st_mode
                    if stat.S_ISREG(mode):
                        add_file(archive, path, name)
                    elif stat.S_ISDIR(mode) or stat.S_ISLNK(mode) or stat.S_ISFIFO(mode):
                        info = archive.gettarinfo(path, arcname=name)
                        archive.addfile(info if stat.S_ISLNK(mode) else with_xattrs(info, path))
                    # Sockets and devices are a running program's, not files to keep.
                except OSError as error:
                    skipped(path, error)


def inside(name):
    """Whether a member's name stays under the directory it is unpacked into."""
    parts = name.split("/")
    return name != "" and not name.startswith("/") and ".." not in parts


def unpack(home):
    directories = []
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as archive:
        for member in archive:
            if not inside(member.name) or (member.islnk() and not inside(member.linkname)):
                sys.stderr.write("home-archive: refused %r: it leaves the home directory\n" % member.name)
                continue
            if not (member.isreg() or member.isdir() or member.issym() or member.islnk() or member.isfifo()):
                continue
            # A directory's mode and time are set once all it holds is in (as extractall does):
            # a read-only one could not take its files, and each file would move its time.
            archive.extract(member, home, set_attrs=False, numeric_owner=True)
            path = os.path.join(home, member.name)
            if member.isdir():
                restore_xattrs(member, path)
                directories.append(member)
                continue
            # Its attributes before its mode: a file it makes read-only takes none after.
            if not member.issym():
                restore_xattrs(member, path)
            # What extract does with set_attrs (an owner as root only; a link's mode and time are its target's).
            archive.chown(member, path, True)
            if not member.issym():
                archive.chmod(member, path)
                archive.utime(member, path)
        for member in reversed(directories):
            path = os.path.join(home, member.name)
            try:
                if os.geteuid() == 0:
                    # Root (a sandbox with root inside) gives each its owner back, as for files.
                    os.chown(path, member.uid, member.gid, follow_symlinks=False)
                os.chmod(path, member.mode, follow_symlinks=False)
                os.utime(path, (member.mtime, member.mtime), follow_symlinks=False)
            except OSError as error:
                skipped(path, error)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("pack", "unpack"):
        sys.stderr.write("usage: home-archive.py pack|unpack DIR\n")
        return 2
    (pack if sys.argv[1] == "pack" else unpack)(sys.argv[2])
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
