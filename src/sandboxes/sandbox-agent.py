# The agent of a long-lived sandbox: its one long job, run inside the sandbox as the sandbox's
# user by `/usr/bin/python3 -I -S -c SOURCE` (src/sandboxes/agent-program.ts). It starts
# processes (pipes or a pseudo-terminal), feeds, signals and resizes them, reports their output
# and end, does file operations and watches directories, for the host (src/sandboxes/).
# Requests come on stdin, replies and events go to stdout, as length-prefixed JSON frames (4-byte
# big-endian length + UTF-8 JSON, src/wire/frame-codec.ts), in the shapes of
# src/contract/sandbox-agent.ts. One thread: a selectors loop over the requests, every child's
# pipes or terminal, the inotify fd and the SIGCHLD wakeup pipe. Nothing here trusts the code it
# runs, which shares the sandbox: the protocol lives on private descriptors no child inherits,
# and the host checks every frame anyway. Python 3.11, standard library only, one file (it may
# run from `-c`, so it never looks for __file__).
import base64
import binascii
import ctypes
import errno
import fcntl
import grp
import json
import os
import pwd
import selectors
import shutil
import signal
import stat
import struct
import sys
import termios
import time

VERSION = "1"
# One output event carries at most this much of a process's output, as read.
OUTPUT_CHUNK = 64 * 1024
# Output of a process sent and not yet credited back by the host (`credit`), when its start
# request names no window: past it the agent stops reading the process's pipes until the host
# says its readers took what it holds.
DEFAULT_OUTPUT_WINDOW = 256 * 1024
# A `read` answers at most this much, whatever it asked: a reply stays well under the host's
# frame limit (16 MiB) once in base64.
READ_CHUNK = 4 * 1024 * 1024
# A listing answers at most this many entries, and this many bytes of them: its reply is one frame,
# which must stay under the host's limit (64 MiB) whatever the tree.
MAX_LIST_ENTRIES = 100_000
MAX_LIST_BYTES = 32 * 1024 * 1024
# A request frame longer than this is skipped unread: no request of the contract comes near it.
MAX_REQUEST = 64 * 1024 * 1024
# Links followed on the way to one file under a root, as the kernel's own limit (MAXSYMLINKS).
MAX_LINKS = 40
# How long, after a process was reaped, its pipes are still read for output it left there, when
# a process it started keeps them open.
DRAIN_GRACE = 0.1
# Then what they hold is read, up to this many chunks each (a full pipe is 16 of them).
DRAIN_READS = 16

# Every errno an operation may meet, as the contract's word for it (contract/sandbox-agent.ts
# AgentErrorCode), which each face maps to its own answer (envd/agent-errors.ts,
# sandboxes/sandbox-files.ts). What the request or the sandbox's own files caused is the caller's
# to fix, so it has a word here; only what is left (EIO, ENOMEM...) is `failed`, a fault of ours.
ERROR_CODES = {
    errno.ENOENT: "not_found",
    errno.EEXIST: "exists",
    errno.ENOTEMPTY: "exists",
    errno.ENOTDIR: "not_a_directory",
    errno.EISDIR: "is_a_directory",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.EROFS: "permission_denied",
    errno.EINVAL: "invalid",
    # A name over 255 bytes or a path over 4095, a loop of links, a move across file systems or
    # into itself, a directory in use (a mount point), a command line or environment over what
    # exec takes, a program that is no executable.
    errno.ENAMETOOLONG: "invalid",
    errno.ELOOP: "invalid",
    errno.EXDEV: "invalid",
    errno.EBUSY: "invalid",
    errno.E2BIG: "invalid",
    errno.ENOEXEC: "invalid",
    errno.ETXTBSY: "invalid",
    # open() of a FIFO no one reads, of a socket, or of a device without its driver.
    errno.ENXIO: "not_regular",
    errno.ENODEV: "not_regular",
    errno.ENOSPC: "no_space",
    errno.EDQUOT: "no_space",
    errno.EFBIG: "no_space",
    errno.ESRCH: "no_such_process",
}

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_DONT_FOLLOW = 0x2000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
# A write is reported once per IN_MODIFY (as fsnotify does); IN_CLOSE_WRITE would repeat it.
WATCH_MASK = IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_DELETE | IN_DELETE_SELF | IN_MOVED_FROM | IN_MOVE_SELF | IN_ATTRIB | IN_ONLYDIR
INOTIFY_EVENT = struct.Struct("iIII")
# fsnotify's names for inotify's events, first match wins.
FS_EVENT_TYPES = (
    (IN_CREATE | IN_MOVED_TO, "create"),
    (IN_MODIFY | IN_CLOSE_WRITE, "write"),
    (IN_DELETE | IN_DELETE_SELF, "remove"),
    (IN_MOVED_FROM | IN_MOVE_SELF, "rename"),
    (IN_ATTRIB, "chmod"),
)
PR_SET_CHILD_SUBREAPER = 36
PR_SET_DUMPABLE = 4

# E2B's user. Made with root inside (SandboxTemplate.rootInside, said by the `root-inside`
# argument) the agent is uid 0 of the sandbox's own user namespace, where the user is mapped too:
# a process runs as the user (no capability) or as root, and a file request acts as the one it
# names. Otherwise (a backend without it, or run as anyone else) both names run as the agent.
USER_UID = 1000
LIBC = ctypes.CDLL(None, use_errno=True)
ROOT_INSIDE = "root-inside" in sys.argv[1:] and os.getuid() == 0
# File requests act as the user they name; the others are the agent's own (signals, input, lists).
FILE_OPERATIONS = {"stat", "mkdir", "move", "list_dir", "remove", "read", "write", "watch"}


class Invalid(Exception):
    """A request that does not have the contract's shape."""


class Refused(Exception):
    """An operation refused with one of the contract's codes."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def failure_of(error):
    if isinstance(error, Refused):
        return {"code": error.code, "message": str(error)}
    if isinstance(error, Invalid):
        return {"code": "invalid", "message": str(error) or "invalid request"}
    if isinstance(error, OSError):
        text = error.strerror or str(error)
        if error.filename is not None:
            text += ": " + str(error.filename)
        return {"code": ERROR_CODES.get(error.errno, "failed"), "message": text}
    if isinstance(error, ValueError):
        # What os refuses before any system call (a NUL in a path, say).
        return {"code": "invalid", "message": str(error)}
    return {"code": "failed", "message": "%s: %s" % (type(error).__name__, error)}


def field(request, name, kind, optional=False):
    value = request.get(name)
    if value is None and optional:
        return None
    # bool is an int to python; the contract's integers are not booleans.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise Invalid("%s: expected %s" % (name, kind.__name__))
    return value


def count(request, name, minimum, maximum=None):
    value = field(request, name, int)
    if value < minimum or (maximum is not None and value > maximum):
        raise Invalid("%s: out of range" % name)
    return value


def decode_base64(text):
    # binascii's strict mode, not b64decode(validate=True), which checks the text with a regular
    # expression first: at a MiB a request, that check was most of the cost of input.
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        raise Invalid("data: not base64")


def user_of(request):
    # "root" only where root exists here; "user" by default.
    name = field(request, "user", str, optional=True)
    if name not in (None, "user", "root"):  # contract/sandbox-agent.ts AGENT_USERS
        raise Invalid("user: expected user or root")
    return "root" if name == "root" and ROOT_INSIDE else "user"


class ActingAs:
    # Root inside, a file request for the user runs with the user's effective ids: what it makes is
    # the user's, and what the user may not touch it may not either. Root's ids come back after.
    def __init__(self, user):
        self.switch = ROOT_INSIDE and user == "user"

    def __enter__(self):
        if self.switch:
            os.setegid(USER_UID)
            try:
                os.seteuid(USER_UID)
            except BaseException:
                os.setegid(0)
                raise

    def __exit__(self, *failure):
        if self.switch:
            os.seteuid(0)
            os.setegid(0)


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


LINUX_CAPABILITY_VERSION_3 = 0x20080522


def become_user():
    # In a child about to exec as the user: every id the user's, so no capability is left and none
    # can come back (a saved uid 0 would let it); the inheritable set, which setresuid keeps,
    # emptied too (capset; the two 32-bit halves of version 3).
    os.setgroups([])
    os.setresgid(USER_UID, USER_UID, USER_UID)
    os.setresuid(USER_UID, USER_UID, USER_UID)
    data = (CapData * 2)()
    if LIBC.capset(ctypes.byref(CapHeader(LINUX_CAPABILITY_VERSION_3, 0)), data) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))


def home():
    value = os.environ.get("HOME")
    if value:
        return value
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return "/"


def resolve(path):
    if not isinstance(path, str) or not path:
        raise Invalid("path: expected a non-empty string")
    return os.path.normpath(os.path.join(home(), path))


def file_path(request):
    """A read's or write's path and the root it must stay under (None: the sandbox as its user
    sees it). Under a root the path is relative to it, and resolved by open_beneath."""
    beneath = field(request, "beneath", str, optional=True)
    if beneath is None:
        return resolve(request.get("path")), None
    path = field(request, "path", str)
    if not beneath.startswith("/") or not path or path.startswith("/"):
        raise Invalid("beneath: an absolute directory, and path relative to it")
    return path, beneath


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def open_regular(path, flags, dir_fd=None):
    """Opens a file to read or write, refusing what is not a regular file: opened without
    O_NONBLOCK, a FIFO the sandbox's code made would hold the agent until something used its
    other end, and a device such as /dev/zero never ends."""
    try:
        fd = os.open(path, flags | os.O_CLOEXEC | os.O_NONBLOCK, 0o666, dir_fd=dir_fd)
    except OSError as error:
        if ERROR_CODES.get(error.errno) != "not_regular":
            raise
        raise Refused("not_regular", "%s: not a regular file (a FIFO, socket or device)" % path)
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    if stat.S_ISDIR(mode):
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    raise Refused("not_regular", "%s: not a regular file (a FIFO, socket or device)" % path)


def open_beneath(root, path, flags, make_parents=False):
    """Opens `path`, relative to the directory `root`, as the kernel would, but never outside
    `root`: each component is opened from the directory fd before it and never through a link;
    a link met is read and its target walked the same way (relative, or absolute under `root`),
    and one that would lead out of `root` (an absolute target elsewhere, `..` above it) is
    refused. The walk only descends from fds it holds and goes up by dropping them, so nothing
    the sandbox's code swaps meanwhile leads it out. With `make_parents`, missing directories on
    the way are made. Returns an fd of a regular file (open_regular)."""
    held = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
    pending = list(reversed(path.split("/")))
    links = 0
    try:
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if len(held) == 1:
                    raise Refused("path_escape", "%s leads out of %s" % (path, root))
                os.close(held.pop())
                continue
            try:
                if not pending:
                    return open_regular(name, flags | os.O_NOFOLLOW, dir_fd=held[-1])
                # Not O_DIRECTORY: with it, gVisor (runsc 20221219) follows a link despite O_NOFOLLOW.
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=held[-1])
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    os.close(fd)
                    raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), name)
                held.append(fd)
                continue
            except FileNotFoundError:
                if not (make_parents and pending):
                    raise
                try:
                    os.mkdir(name, 0o777, dir_fd=held[-1])
                except FileExistsError:
                    pass  # made meanwhile: opened on the next turn, whatever it is
                pending.append(name)
                continue
            except OSError as error:
                # A link, or something that is not a directory (said as the kernel says it).
                try:
                    target = os.readlink(name, dir_fd=held[-1])
                except OSError:
                    raise error
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            if target.startswith("/"):
                parts = [part for part in target.split("/") if part not in ("", ".")]
                under = [part for part in root.split("/") if part not in ("", ".")]
                if parts[: len(under)] != under:
                    raise Refused("path_escape", "%s leads out of %s (a link to %s)" % (path, root, target))
                for fd in held[1:]:
                    os.close(fd)
                del held[1:]
                target = "/".join(parts[len(under):])
            pending.extend(reversed(target.split("/")))
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    finally:
        for fd in held:
            os.close(fd)


def make_parents(path):
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
    except FileExistsError:
        # Something that is not a directory stands where a parent should be.
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), parent)


_names = {}


def name_of(table, key):
    # Owner and group names, looked up once each, the number itself when there is no name.
    cache = _names.setdefault(table, {})
    if key not in cache:
        try:
            cache[key] = (pwd.getpwuid if table == "user" else grp.getgrgid)(key)[0]
        except KeyError:
            cache[key] = str(key)
    return cache[key]


def entry_of(path):
    info = os.lstat(path)
    mode = info.st_mode
    if stat.S_ISREG(mode):
        kind = "file"
    elif stat.S_ISDIR(mode):
        kind = "directory"
    elif stat.S_ISLNK(mode):
        kind = "symlink"
    else:
        kind = "other"
    entry = {
        "name": os.path.basename(path) or path,
        "path": path,
        "type": kind,
        "size": info.st_size,
        "mode": stat.S_IMODE(mode),
        "permissions": stat.filemode(mode),
        "owner": name_of("user", info.st_uid),
        "group": name_of("group", info.st_gid),
        "modified_ms": info.st_mtime_ns / 1e6,
    }
    if kind == "symlink":
        entry["symlink_target"] = link_target(path)
    metadata = metadata_of(path)
    if metadata:
        entry["metadata"] = metadata
    return entry


# envd's file metadata: extended attributes in this namespace, the prefix cut.
METADATA_XATTR = "user.e2b."


def metadata_of(path):
    """The file's metadata; {} where the file system keeps no extended attributes."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
        return {name[len(METADATA_XATTR):]: os.getxattr(path, name, follow_symlinks=False).decode("ascii", "replace")
                for name in names if name.startswith(METADATA_XATTR)}
    except OSError:
        return {}


def metadata_field(request):
    metadata = field(request, "metadata", dict, optional=True) or {}
    for key, value in metadata.items():
        if not (isinstance(value, str) and key.isascii() and key.isprintable() and value.isascii() and value.isprintable()):
            raise Invalid("metadata: keys and values must be printable ASCII")
    return metadata


def set_metadata(fd, metadata):
    """Makes the open file's metadata exactly `metadata` (envd: an upload replaces what it had).
    A file system without extended attributes has none to remove, and refuses some to set."""
    try:
        for name in os.listxattr(fd):
            if name.startswith(METADATA_XATTR):
                os.removexattr(fd, name)
        for key, value in metadata.items():
            os.setxattr(fd, METADATA_XATTR + key, value.encode("ascii"))
    except OSError as error:
        if error.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        if metadata:
            raise Invalid("metadata: this sandbox's file system keeps no extended attributes") from error


def link_target(path):
    """Where a link leads, as an absolute path (envd's EvalSymlinks): to its end when the chain
    resolves, else the link's own target, taken against the link's directory."""
    try:
        return os.path.realpath(path, strict=True)
    except OSError:
        return os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))


def process_tree(root):
    """`root` and every process descending from it, by the parent each names in /proc."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                line = handle.read()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: the fields after its last
        # ')' are the state, then the parent.
        fields = line[line.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def signal_tree(pid, number):
    """`number` to the group `pid` leads and to every descendant, wherever its group: a process
    that made its own session must not outlive a kill of the tree that started it."""
    tree = process_tree(pid)
    try:
        os.killpg(pid, number)
    except OSError:
        pass
    for member in tree:
        try:
            os.kill(member, number)
        except OSError:
            pass


class Process:
    def __init__(self, pid, config, pty):
        self.pid = pid
        self.config = config
        self.pty = pty
        # Output descriptors still read, each with its stream's name.
        self.outputs = {}
        self.stdin = None
        self.pending = bytearray()
        self.close_when_written = False
        self.status = None
        self.deadline = None
        # Bytes of output the agent may still send before the host credits some back; at 0 or
        # below its outputs are not read, so its pipes fill and its writes block.
        self.window = DEFAULT_OUTPUT_WINDOW
        self.credit = DEFAULT_OUTPUT_WINDOW


class Agent:
    def __init__(self, proto_in, proto_out):
        self.proto_in = proto_in
        self.proto_out = proto_out
        # poll, not epoll: a gVisor sandbox restored from a checkpoint (a pause that keeps
        # memory) hands the agent new host pipes, and an epoll set made before the checkpoint
        # never reports them ready again; poll asks afresh on every call.
        self.selector = selectors.PollSelector()
        self.readers = {}
        self.writers = {}
        self.processes = {}
        self.watches = {}
        self.watch_ids = 0
        self.wd_watches = {}
        self.inotify = None
        self.requests = bytearray()
        self.skipping = 0
        self.running = True

    # --- the loop -------------------------------------------------------------------------

    def interest(self, fd, reader=None, writer=None, drop=False):
        """Sets (or with `drop`, forgets) what the loop does when `fd` is readable or writable."""
        if reader is not None:
            self.readers[fd] = reader
        if writer is not None:
            self.writers[fd] = writer
        if drop == "reader" or drop is True:
            self.readers.pop(fd, None)
        if drop == "writer" or drop is True:
            self.writers.pop(fd, None)
        events = (selectors.EVENT_READ if fd in self.readers else 0) | (selectors.EVENT_WRITE if fd in self.writers else 0)
        registered = fd in self.selector.get_map()
        if events and registered:
            self.selector.modify(fd, events)
        elif events:
            self.selector.register(fd, events)
        elif registered:
            self.selector.unregister(fd)

    def send(self, message):
        payload = json.dumps(message, separators=(",", ":")).encode()
        write_all(self.proto_out, len(payload).to_bytes(4, "big") + payload)

    def run(self):
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        # A handler, not SIG_DFL: only a handled signal writes to the wakeup pipe.
        signal.signal(signal.SIGCHLD, lambda number, frame: None)
        self.interest(wake_read, reader=lambda: self.reap(wake_read))
        self.interest(self.proto_in, reader=self.read_requests)
        self.send({"ready": True, "version": VERSION})
        try:
            self.serve()
        finally:
            self.shut_down()

    def serve(self):
        while self.running:
            deadlines = [process.deadline for process in self.processes.values() if process.deadline is not None]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            for key, events in self.selector.select(timeout):
                if events & selectors.EVENT_READ and key.fd in self.readers:
                    self.readers[key.fd]()
                if events & selectors.EVENT_WRITE and key.fd in self.writers:
                    self.writers[key.fd]()
                if not self.running:
                    break
            now = time.monotonic()
            for process in list(self.processes.values()):
                if process.deadline is not None and process.deadline <= now:
                    self.stop_reading(process)

    def read_requests(self):
        data = os.read(self.proto_in, 1 << 20)
        if not data:
            self.running = False
            return
        self.requests += data
        while True:
            if self.skipping:
                skipped = min(self.skipping, len(self.requests))
                del self.requests[:skipped]
                self.skipping -= skipped
                if self.skipping:
                    return
            if len(self.requests) < 4:
                return
            length = int.from_bytes(self.requests[:4], "big")
            if length > MAX_REQUEST:
                del self.requests[:4]
                self.skipping = length
                continue
            if len(self.requests) < 4 + length:
                return
            payload = bytes(self.requests[4:4 + length])
            del self.requests[:4 + length]
            self.handle(payload)

    def handle(self, payload):
        try:
            request = json.loads(payload.decode("utf-8"))
        except ValueError:
            return  # no id to answer: nothing to say
        if not isinstance(request, dict):
            return
        request_id = request.get("id")
        if not isinstance(request_id, int) or isinstance(request_id, bool) or request_id < 1:
            return
        operation = OPERATIONS.get(request.get("op")) if isinstance(request.get("op"), str) else None
        try:
            if operation is None:
                raise Invalid("unknown op")
            with ActingAs(user_of(request) if request["op"] in FILE_OPERATIONS else "root"):
                reply = operation(self, request)
        except Exception as error:
            reply = {"error": failure_of(error)}
        self.send(dict(reply, id=request_id))

    def shut_down(self):
        # The host is gone: nothing the agent started outlives it, including what those
        # processes left behind (reparented to the agent, its subreaper).
        for _ in range(5):
            running = [process for process in self.processes.values() if process.status is None]
            tree = process_tree(os.getpid())[1:]
            for process in running:
                tree.extend(process_tree(process.pid))
            if not tree:
                break
            for process in running:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except OSError:
                    pass
            for pid in tree:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            # Reaped, so that none is left a zombie for whoever watches its pid.
            give_up = time.monotonic() + 1.0
            while time.monotonic() < give_up:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    time.sleep(0.01)
                elif pid in self.processes:
                    self.processes[pid].status = status

    # --- processes ------------------------------------------------------------------------

    def reap(self, wake_read):
        try:
            while os.read(wake_read, 4096):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            process = self.processes.get(pid)
            if process is None or process.status is not None:
                continue  # an orphan the agent adopted as subreaper
            process.status = status
            process.pending.clear()
            if process.stdin is not None and not process.pty:
                self.interest(process.stdin, drop=True)
                os.close(process.stdin)
            process.stdin = None
            if process.outputs:
                process.deadline = time.monotonic() + DRAIN_GRACE
            else:
                self.finish(process)

    def finish(self, process):
        if process.outputs or process.status is None or process.pid not in self.processes:
            return
        del self.processes[process.pid]
        code = os.waitstatus_to_exitcode(process.status)
        if code < 0:
            self.send({"event": "end", "pid": process.pid, "exit_code": 128 - code, "signal": -code})
        else:
            self.send({"event": "end", "pid": process.pid, "exit_code": code, "signal": None})

    def read_output(self, process, fd):
        try:
            data = os.read(fd, OUTPUT_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            # A terminal's master reads EIO once no one holds its other side.
            data = b""
        if data:
            self.send_output(process, fd, data)
            return
        self.close_output(process, fd)
        self.finish(process)

    def send_output(self, process, fd, data):
        process.credit -= len(data)
        if process.credit <= 0:
            for output in process.outputs:
                self.interest(output, drop="reader")
        # Written out rather than through json.dumps, which scans every byte of the base64 text for
        # what to escape (it holds nothing to): output is most of what the agent sends, and this
        # is a third of the cost.
        payload = b'{"event":"output","pid":%d,"stream":"%s","data":"%s"}' % (process.pid, process.outputs[fd].encode(), base64.b64encode(data))
        write_all(self.proto_out, len(payload).to_bytes(4, "big") + payload)

    def stop_reading(self, process):
        """Past the grace: what the pipes hold now is still reported (bounded, as a process that
        keeps them open may keep writing), then they are closed and the end reported. Without
        credit the rest waits for it (op_credit), and the end with it."""
        for fd in list(process.outputs):
            for _ in range(DRAIN_READS):
                if process.credit <= 0:
                    process.deadline = None
                    return
                try:
                    data = os.read(fd, OUTPUT_CHUNK)
                except OSError:
                    break
                if not data:
                    break
                self.send_output(process, fd, data)
            self.close_output(process, fd)
        self.finish(process)

    def close_output(self, process, fd):
        del process.outputs[fd]
        self.interest(fd, drop=True)
        if process.stdin == fd:
            process.stdin = None
            process.pending.clear()
        os.close(fd)

    def write_input(self, process):
        fd = process.stdin
        try:
            while process.pending:
                written = os.write(fd, process.pending[:OUTPUT_CHUNK])
                del process.pending[:written]
        except BlockingIOError:
            self.interest(fd, writer=lambda: self.write_input(process))
            return
        except OSError:
            # The reader is gone (EPIPE): what was not written never will be.
            process.pending.clear()
            if not process.pty:
                process.close_when_written = True
        self.interest(fd, drop="writer")
        if process.close_when_written and not process.pty:
            self.interest(fd, drop=True)
            os.close(fd)
            process.stdin = None

    def running_process(self, request):
        process = self.processes.get(count(request, "pid", 1))
        if process is None or process.status is not None:
            raise Refused("no_such_process", "no running process %d" % request["pid"])
        return process

    def op_start(self, request):
        cmd = field(request, "cmd", str)
        args = field(request, "args", list)
        envs = field(request, "envs", dict)
        cwd = field(request, "cwd", str, optional=True)
        tag = field(request, "tag", str, optional=True)
        size = field(request, "pty", dict, optional=True)
        keep_stdin = field(request, "stdin", bool)
        window = count(request, "output_window", 1) if "output_window" in request else DEFAULT_OUTPUT_WINDOW
        as_root = user_of(request) == "root"
        if not cmd or not all(isinstance(arg, str) for arg in args):
            raise Invalid("cmd and args: expected strings")
        if not all(isinstance(key, str) and key and "=" not in key and isinstance(value, str) for key, value in envs.items()):
            raise Invalid("envs: expected names and string values")
        if any("\0" in text for text in [cmd, *args, *envs, *envs.values(), cwd or "", tag or ""]):
            raise Invalid("a NUL in a string")
        if size is not None:
            size = (count(size, "rows", 1, 0xFFFF), count(size, "cols", 1, 0xFFFF))
        env = dict(os.environ)
        if as_root:
            # Root's own home (read-only, empty): a shell or python started as root reads no
            # profile or site-packages the user could have written.
            env.update(USER="root", LOGNAME="root", HOME="/root")
        env.update(envs)
        if size is not None:
            env.setdefault("TERM", "xterm-256color")
        directory = resolve(cwd) if cwd else home()

        parent_fds, child_fds = [], []
        try:
            if size is not None:
                master, slave = os.openpty()
                parent_fds.append(master)
                child_fds.append(slave)
                fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
                if ROOT_INSIDE and not as_root:
                    os.fchown(slave, USER_UID, USER_UID)  # the user's terminal, as a login gives it
                stdio = (slave, slave, slave)
                outputs = {master: "pty"}
                stdin = master
            else:
                out_read, out_write = os.pipe()
                err_read, err_write = os.pipe()
                parent_fds += [out_read, err_read]
                child_fds += [out_write, err_write]
                stdin = None
                stdin_child = 0  # the agent's own fd 0 is /dev/null
                if keep_stdin:
                    stdin_child, stdin = os.pipe()
                    parent_fds.append(stdin)
                    child_fds.append(stdin_child)
                stdio = (stdin_child, out_write, err_write)
                outputs = {out_read: "stdout", err_read: "stderr"}
            error_read, error_write = os.pipe()
            parent_fds.append(error_read)
            child_fds.append(error_write)
            pid = os.fork()
            if pid == 0:
                exec_child(cmd, args, env, directory, stdio, size is not None, ROOT_INSIDE and not as_root, error_write)
            for fd in child_fds:
                os.close(fd)
            child_fds = []
            # The exec closes the error pipe (close-on-exec); a failure writes its errno first.
            report = b""
            while True:
                part = os.read(error_read, 64)
                if not part:
                    break
                report += part
            os.close(error_read)
            parent_fds.remove(error_read)
        except BaseException:
            for fd in parent_fds + child_fds:
                os.close(fd)
            raise
        if report:
            os.waitpid(pid, 0)
            for fd in parent_fds:
                os.close(fd)
            number = int(report) if report.isdigit() else 0
            if number == 0:
                raise Refused("failed", "could not start %s" % cmd)
            raise OSError(number, os.strerror(number), cmd)

        config = {"pid": pid, "cmd": cmd, "args": args, "envs": envs}
        if cwd is not None:
            config["cwd"] = cwd
        if tag is not None:
            config["tag"] = tag
        process = Process(pid, config, size is not None)
        process.window = process.credit = window
        process.stdin = stdin
        self.processes[pid] = process
        for fd, stream in outputs.items():
            os.set_blocking(fd, False)
            process.outputs[fd] = stream
            self.interest(fd, reader=lambda fd=fd: self.read_output(process, fd))
        if stdin is not None and size is None:
            os.set_blocking(stdin, False)
        return {"pid": pid}

    def op_input(self, request):
        process = self.running_process(request)
        data = decode_base64(field(request, "data", str))
        if process.stdin is None or process.close_when_written:
            raise Refused("invalid", "process %d takes no input" % process.pid)
        process.pending += data
        if process.stdin not in self.writers:
            self.write_input(process)
        return {}

    def op_close_stdin(self, request):
        process = self.running_process(request)
        if process.pty:
            # A terminal has no end of input to close: its end-of-file character (^D) says the
            # same to a program reading a line, as a user typing it would.
            process.pending += b"\x04"
            if process.stdin is not None and process.stdin not in self.writers:
                self.write_input(process)
        elif process.stdin is not None:
            process.close_when_written = True
            if process.stdin not in self.writers:
                self.write_input(process)
        return {}

    def op_signal(self, request):
        process = self.running_process(request)
        signal_tree(process.pid, count(request, "signal", 1, signal.SIGRTMAX))
        return {}

    def op_resize(self, request):
        process = self.running_process(request)
        rows, cols = count(request, "rows", 1, 0xFFFF), count(request, "cols", 1, 0xFFFF)
        if not process.pty or process.stdin is None:
            raise Refused("invalid", "process %d has no terminal" % process.pid)
        # The kernel signals the terminal's foreground group; the group the agent started gets
        # it too, in case that is not the foreground one.
        fcntl.ioctl(process.stdin, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        try:
            os.killpg(process.pid, signal.SIGWINCH)
        except OSError:
            pass
        return {}

    def op_credit(self, request):
        """The host's readers took `bytes` of a process's output: that much more may be sent.
        A process that ended meanwhile is no error (its last output may still be credited)."""
        process = self.processes.get(count(request, "pid", 1))
        credit = count(request, "bytes", 0)
        if process is None:
            return {}
        was_stopped = process.credit <= 0
        # Never more than a window ahead: a host that credits twice (a restored agent's new host)
        # gets no more in flight than it allows.
        process.credit = min(process.window, process.credit + credit)
        if was_stopped and process.credit > 0:
            for fd in process.outputs:
                self.interest(fd, reader=lambda fd=fd: self.read_output(process, fd))
            if process.status is not None:
                process.deadline = time.monotonic() + DRAIN_GRACE
        return {}

    def op_list(self, request):
        return {"processes": [process.config for process in self.processes.values() if process.status is None]}

    def op_ping(self, request):
        # The host's heartbeat: an answer says the loop still turns.
        return {}

    # --- files ----------------------------------------------------------------------------

    def op_stat(self, request):
        return {"entry": entry_of(resolve(request.get("path")))}

    def op_mkdir(self, request):
        path = resolve(request.get("path"))
        if os.path.isdir(path):
            return {"entry": entry_of(path), "created": False}
        if os.path.lexists(path):
            raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), path)
        try:
            os.makedirs(path)
        except FileExistsError:
            if not os.path.isdir(path):
                raise
            return {"entry": entry_of(path), "created": False}
        return {"entry": entry_of(path), "created": True}

    def op_move(self, request):
        source = resolve(request.get("source"))
        destination = resolve(request.get("destination"))
        os.lstat(source)
        make_parents(destination)
        os.rename(source, destination)
        return {"entry": entry_of(destination)}

    def op_list_dir(self, request):
        path = resolve(request.get("path"))
        depth = count(request, "depth", 1)
        entries = []
        size = [0]

        def walk(directory, level):
            try:
                children = list(os.scandir(directory))
            except OSError:
                if level == 1:
                    raise
                return  # a subdirectory it may not read: listed, not entered
            for child in children:
                try:
                    entry = entry_of(child.path)
                except OSError:
                    continue  # gone since the directory was read
                entries.append(entry)
                size[0] += len(json.dumps(entry))
                if len(entries) > MAX_LIST_ENTRIES or size[0] > MAX_LIST_BYTES:
                    raise Refused("too_large", "%s holds more than %d entries (or %d bytes of them) to depth %d: list less deep"
                                  % (path, MAX_LIST_ENTRIES, MAX_LIST_BYTES, depth))
                if level < depth and child.is_dir(follow_symlinks=False):
                    walk(child.path, level + 1)

        walk(path, 1)
        entries.sort(key=lambda entry: entry["path"])
        return {"entries": entries}

    def op_remove(self, request):
        path = resolve(request.get("path"))
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path)  # never follows a link out of the tree
        else:
            os.unlink(path)
        return {}

    def op_read(self, request):
        path, beneath = file_path(request)
        offset = count(request, "offset", 0)
        length = min(count(request, "length", 1), READ_CHUNK)
        fd = open_beneath(beneath, path, os.O_RDONLY) if beneath else open_regular(path, os.O_RDONLY)
        try:
            info = os.fstat(fd)
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        # A short read ends any file; a regular file also ends at its size (files of /proc
        # say size 0 and have content).
        eof = len(data) < length or (stat.S_ISREG(info.st_mode) and info.st_size > 0 and offset + len(data) >= info.st_size)
        return {"data": base64.b64encode(data).decode(), "eof": eof}

    def op_write(self, request):
        path, beneath = file_path(request)
        data = decode_base64(field(request, "data", str))
        append = field(request, "append", bool)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        if beneath:
            fd = open_beneath(beneath, path, flags, make_parents=not append)
        else:
            if not append:
                make_parents(path)
            fd = open_regular(path, flags)
        try:
            if not append:
                set_metadata(fd, metadata_field(request))
            write_all(fd, data)
        finally:
            os.close(fd)
        return {"entry": entry_of(os.path.join(beneath, path) if beneath else path)}

    # --- watches --------------------------------------------------------------------------

    def add_inotify_watch(self, path, mask):
        wd = LIBC.inotify_add_watch(self.inotify, os.fsencode(path), ctypes.c_uint32(mask))
        if wd < 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number), path)
        return wd

    def watch_directory(self, watch, relative, found=None):
        """Watches `relative` (under the watch's root), and for a recursive watch every directory
        in it, without following links. `found` collects what the directories already held (their
        relative paths, parents first)."""
        path = os.path.join(watch["root"], relative) if relative else watch["root"]
        wd = self.add_inotify_watch(path, WATCH_MASK | (IN_DONT_FOLLOW if relative else 0))
        watch["wds"][wd] = relative
        self.wd_watches.setdefault(wd, set()).add(watch["id"])
        if not watch["recursive"]:
            return
        try:
            children = [(child.name, child.is_dir(follow_symlinks=False)) for child in os.scandir(path)]
        except OSError:
            return
        for name, is_dir in sorted(children):
            child = os.path.join(relative, name)
            if found is not None:
                found.append(child)
            if not is_dir:
                continue
            try:
                self.watch_directory(watch, child, found)
            except OSError:
                pass  # gone, or not readable: its parent's events still come

    def forget_wd(self, watch, wd, removed):
        watch["wds"].pop(wd, None)
        users = self.wd_watches.get(wd)
        if users is None:
            return
        users.discard(watch["id"])
        if not users:
            del self.wd_watches[wd]
            if not removed:
                LIBC.inotify_rm_watch(self.inotify, wd)

    def op_watch(self, request):
        path = resolve(request.get("path"))
        recursive = field(request, "recursive", bool)
        if self.inotify is None:
            fd = LIBC.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd < 0:
                number = ctypes.get_errno()
                raise OSError(number, os.strerror(number))
            self.inotify = fd
            self.interest(fd, reader=self.read_inotify)
        self.watch_ids += 1
        watch = {"id": self.watch_ids, "root": path, "recursive": recursive, "wds": {}, "user": user_of(request)}
        try:
            self.watch_directory(watch, "")
        except BaseException:
            for wd in list(watch["wds"]):
                self.forget_wd(watch, wd, False)
            raise
        self.watches[watch["id"]] = watch
        return {"watch": watch["id"]}

    def op_unwatch(self, request):
        watch = self.watches.pop(count(request, "watch", 1), None)
        if watch is None:
            raise Refused("not_found", "no watch %d" % request["watch"])
        for wd in list(watch["wds"]):
            self.forget_wd(watch, wd, False)
        return {}

    def read_inotify(self):
        try:
            data = os.read(self.inotify, 1 << 16)
        except BlockingIOError:
            return
        offset = 0
        while offset + INOTIFY_EVENT.size <= len(data):
            wd, mask, _cookie, length = INOTIFY_EVENT.unpack_from(data, offset)
            name = data[offset + INOTIFY_EVENT.size:offset + INOTIFY_EVENT.size + length].rstrip(b"\0")
            offset += INOTIFY_EVENT.size + length
            if mask & IN_Q_OVERFLOW:
                continue
            for watch_id in list(self.wd_watches.get(wd, ())):
                self.inotify_event(self.watches[watch_id], wd, mask, name.decode("utf-8", "replace"))

    def inotify_event(self, watch, wd, mask, name):
        relative = watch["wds"].get(wd)
        if relative is None:
            return
        if mask & IN_IGNORED:
            self.forget_wd(watch, wd, True)
            return
        if mask & (IN_DELETE_SELF | IN_MOVE_SELF) and relative:
            return  # a subdirectory's own end is its parent's event already
        path = os.path.join(relative, name) if name else relative
        # What a new directory already holds when its watch is added (made with it, as by
        # `mkdir -p a/b && echo > a/b/c`) made no event of its own: reported after the directory.
        found = []
        if watch["recursive"] and mask & IN_ISDIR:
            if mask & IN_MOVED_FROM:
                # Out of the tree, or about to come back under another name (IN_MOVED_TO).
                for other, other_relative in list(watch["wds"].items()):
                    if other_relative == path or other_relative.startswith(path + "/"):
                        self.forget_wd(watch, other, False)
            elif mask & (IN_CREATE | IN_MOVED_TO):
                # Watched before it is reported: a client that waits for this event then acts
                # inside the directory is seen.
                try:
                    # As the watch's user, as when it was made: the user's watch enters no directory
                    # only root may read.
                    with ActingAs(watch["user"]):
                        self.watch_directory(watch, path, found)
                except OSError:
                    pass
        for bits, kind in FS_EVENT_TYPES:
            if mask & bits:
                self.send({"event": "fs", "watch": watch["id"], "name": path, "type": kind})
                break
        for child in found:
            self.send({"event": "fs", "watch": watch["id"], "name": child, "type": "create"})


def exec_child(cmd, args, env, directory, stdio, terminal, as_user, error_write):
    """In the forked child: a session of its own, its stdio, its user, then the program. Never
    returns; an exec that fails writes its errno to `error_write` for the agent to report."""
    try:
        if as_user:
            become_user()
        os.setsid()
        if terminal:
            fcntl.ioctl(stdio[0], termios.TIOCSCTTY, 0)
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        # Python ignores these; the programs it starts expect them as the system sets them.
        for number in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(number, signal.SIG_DFL)
        os.chdir(directory)
        os.execvpe(cmd, [cmd, *args], env)
    except OSError as error:
        os.write(error_write, str(error.errno or 0).encode())
    except BaseException:
        os.write(error_write, b"0")
    os._exit(127)


OPERATIONS = {name[3:]: method for name, method in vars(Agent).items() if name.startswith("op_")}


def main():
    # The processes the agent starts run as its uid: while the agent is dumpable they could open
    # /proc/<agent>/fd/N (its protocol pipes, to forge frames or steal requests) and
    # /proc/<agent>/mem. Not dumpable, its /proc entries are root's. Its children are dumpable
    # again once they exec, which is theirs to be.
    LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if ROOT_INSIDE:
        os.setgroups([])  # the processes it starts as root belong to root's group alone
    # The protocol moves to private descriptors (os.dup's are not inheritable), and fds 0-2
    # become /dev/null: nothing the agent starts can write a frame or read a request. The
    # agent's own failure, if any, still reaches whatever stderr it was given.
    proto_in, proto_out, diagnostics = os.dup(0), os.dup(1), os.dup(2)
    # Nor anything else the agent was given: its own descriptors stay its own.
    for name in os.listdir("/proc/self/fd"):
        try:
            os.set_inheritable(int(name), False)
        except OSError:
            pass  # the listing's own descriptor, closed since
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    os.set_blocking(proto_out, True)
    sys.stdout = sys.stderr = open(diagnostics, "w", closefd=False)
    try:
        # Whatever the processes it started leave behind is reparented to the agent, which
        # reaps it and can end it.
        LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        Agent(proto_in, proto_out).run()
    except BrokenPipeError:
        pass  # the host stopped reading: it is gone
    sys.exit(0)


main()
