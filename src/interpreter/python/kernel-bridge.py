# The bridge of one code-interpreter context: runs inside a sandbox as its user, started through
# the sandbox's agent by src/interpreter/kernel-bridge.ts (`python3 -I -c SOURCE PARTS... LANGUAGE
# SOURCES...`, for a code context or a session's kernel), and drives the kernel that runs the
# context's cells (a process of its own: bridge-kernels.py), turning what it says into the output
# lines of E2B's code interpreter (stdout, stderr, result, error: bridge-lines.py; and
# number_of_executions).
#
# Requests come on stdin and replies go to stdout, as length-prefixed JSON frames (4-byte
# big-endian length). The kernel is another process whose stdio is not the protocol: what a
# cell prints (os.write(1) included) reaches the host as text inside an output line, never as
# a frame. The bridge makes itself not dumpable, so the cells (same uid)
# cannot open its pipes through /proc.
#
#   -> {"id": n, "op": "execute", "code": str, "env_vars": {str: str}}
#   <- {"id": n, "output": {...one output line...}} ... then {"id": n, "done": true}
#   -> {"id": n, "op": "interrupt"}     (also while an execute runs)  <- {"id": n}
#   -> {"id": n, "op": "restart"}       <- {"id": n}
# The environment's AGENT_RUNNER_WORK_DIR (taken out of it) is the directory the kernel works in:
# the bridge enters it, and when it cannot (a missing one, one the sandbox's user may not enter)
# stays where it started, which the first cell is told on stderr.
# argv: the sources of the bridge's parts (PARTS: bridge-lines.py, then bridge-kernels.py), the
# language, then for python the sources of charts.py and startup.py (which the kernel
# imports before the first cell) and kernel-python.py, for javascript the source of kernel-node.cjs
# and, optionally, the node to run it on, for java the source of JavaKernel.java, for r kernel-r.R's.
import ctypes
import json
import os
import queue
import struct
import sys
import threading
import time
import types

# The bridge's parts, in the order their sources come on argv. The sandbox may have no copy of our
# files, and -I keeps PYTHONPATH out, so each is loaded from its source as the module its file
# names (bridge-lines.py: bridge_lines), compiled under its file's name so that a traceback names
# the part; a part imports the ones before it by those names, as this file does below. Imported
# (a test), this file expects its parts in sys.modules already.
PARTS = ("bridge-lines.py", "bridge-kernels.py")


def load_parts(sources):
    for file_name, source in zip(PARTS, sources):
        module = types.ModuleType(file_name[:-len(".py")].replace("-", "_"))
        sys.modules[module.__name__] = module
        exec(compile(source, file_name, "exec"), module.__dict__)


if __name__ == "__main__":
    load_parts(sys.argv[1:1 + len(PARTS)])

from bridge_kernels import KERNELS, describe_exit
from bridge_lines import error_line

VERSION = "1"
# A request frame longer than this is refused unread: a cell's code is far smaller.
MAX_REQUEST = 16 * 1024 * 1024
# An interrupted cell that is still running after this has ignored SIGINT: the kernel restarts.
INTERRUPT_GRACE = 3.0
PR_SET_DUMPABLE = 4


class Protocol:
    def __init__(self):
        self.lock = threading.Lock()
        self.out = os.fdopen(os.dup(1), "wb", buffering=0)
        # Nothing else of this process writes to the protocol, whatever a library prints.
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)

    def send(self, message):
        body = json.dumps(message, separators=(",", ":")).encode()
        with self.lock:
            self.out.write(struct.pack(">I", len(body)) + body)


def read_exactly(stream, size):
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def read_requests(requests):
    """Frames from stdin onto `requests`; None when stdin ends (the host is done with the context)."""
    stream = sys.stdin.buffer
    while True:
        header = read_exactly(stream, 4)
        if header is None:
            break
        (length,) = struct.unpack(">I", header)
        if length > MAX_REQUEST:
            requests.put({"invalid": "a request of %d bytes" % length})
            break
        body = read_exactly(stream, length)
        if body is None:
            break
        try:
            requests.put(json.loads(body))
        except ValueError as error:
            requests.put({"invalid": str(error)})
    requests.put(None)


class Bridge:
    def __init__(self, protocol, language, sources):
        self.protocol = protocol
        self.make_kernel = lambda: KERNELS[language](sources)
        self.language = language
        self.requests = queue.Queue()
        self.kernel = self.make_kernel()
        self.executions = 0
        # Why the kernel was last replaced under a cell, told to the next cell too: the client of
        # the cell it happened to may have left already (a timeout).
        self.notice = None

    def serve(self):
        threading.Thread(target=read_requests, args=(self.requests,), daemon=True).start()
        self.protocol.send({"ready": True, "version": VERSION, "language": self.language})
        while True:
            request = self.requests.get()
            if request is None:
                return
            self.handle(request)

    def handle(self, request):
        if "invalid" in request or not isinstance(request.get("id"), int):
            self.protocol.send({"id": request.get("id", 0), "error": "invalid request: %s" % request.get("invalid", "no id")})
            return
        op = request.get("op")
        if op == "execute":
            self.execute(request["id"], str(request.get("code", "")), request.get("env_vars") or {})
        elif op == "interrupt":
            self.kernel.interrupt()
            self.protocol.send({"id": request["id"]})
        elif op == "restart":
            self.restart()
            self.protocol.send({"id": request["id"]})
        else:
            self.protocol.send({"id": request["id"], "error": "unknown op %r" % op})

    def restart(self):
        self.kernel.stop()
        self.kernel = self.make_kernel()

    def execute(self, request_id, code, env_vars):
        def emit(output):
            self.protocol.send({"id": request_id, "output": output})

        if self.notice is not None:
            emit({"type": "stderr", "text": "[%s]\n" % self.notice})
            self.notice = None
        scoped = bool(env_vars) and not self.kernel.ENV_WITH_CELL
        if scoped:
            self.run_silently(self.kernel.env_code(env_vars))
        try:
            self.run(code, emit, env_vars=env_vars if self.kernel.ENV_WITH_CELL else None)
        finally:
            if scoped and self.kernel.alive():
                self.run_silently(self.kernel.restore_env_code())
        self.protocol.send({"id": request_id, "done": True})

    def run_silently(self, code):
        self.run(code, lambda output: None, silent=True)

    def run(self, code, emit, silent=False, env_vars=None):
        if not silent:
            self.executions += 1
            emit({"type": "number_of_executions", "execution_count": self.executions})
        try:
            if env_vars is None:
                self.kernel.begin(code, silent)
            else:
                self.kernel.begin(code, silent, env_vars)
        except BrokenPipeError:
            pass  # the kernel ended between cells: said below, as any end
        while True:
            self.take_interrupts()
            self.kernel.keep_interrupting()
            if not self.kernel.alive():
                self.replace_kernel("KernelDied", "the kernel ended (%s); the context restarted without its state"
                                    % describe_exit(self.kernel.process.returncode), "", emit)
                return
            interrupted_at = self.kernel.interrupted_at
            if interrupted_at is not None and time.monotonic() - interrupted_at > INTERRUPT_GRACE:
                self.replace_kernel("ContextRestarted", "a cell did not stop when interrupted; the context restarted without its state", "", emit)
                return
            lines, done = self.kernel.poll(0.05)
            for line in lines:
                emit(line)
            if done:
                return

    def replace_kernel(self, name, why, traceback, emit):
        emit(error_line(name, why, traceback))
        self.restart()
        self.notice = why

    def take_interrupts(self):
        """Answers the interrupts that came while a cell runs; anything else waits its turn."""
        held = []
        while True:
            try:
                request = self.requests.get_nowait()
            except queue.Empty:
                break
            if request is not None and request.get("op") == "interrupt" and isinstance(request.get("id"), int):
                self.kernel.interrupt()
                self.protocol.send({"id": request["id"]})
            else:
                held.append(request)
        for request in held:
            self.requests.put(request)


def enter_work_dir(path):
    """Enters the context's directory; why not, if it cannot (then the kernel works where the bridge started)."""
    if not path:
        return None
    try:
        os.chdir(path)
    except OSError as error:
        return "the context's directory %s could not be entered (%s); it works in %s" % (path, error.strerror, os.getcwd())
    return None


def main():
    protocol = Protocol()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    language, *given = sys.argv[1 + len(PARTS):]
    names = {"python": ("agent_runner_charts", "agent_runner_startup", "kernel-python"), "javascript": ("kernel-node", "node"), "bash": (),
             "java": ("kernel-java",), "r": ("kernel-r",)}[language]
    sources = dict(zip(names, given))
    notice = enter_work_dir(os.environ.pop("AGENT_RUNNER_WORK_DIR", None))
    try:
        bridge = Bridge(protocol, language, sources)
    except Exception as error:  # the kernel did not start: said once, then the context is over
        protocol.send({"ready": False, "error": "%s: %s" % (type(error).__name__, error)})
        return 1
    bridge.notice = notice
    try:
        bridge.serve()
    finally:
        bridge.kernel.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
