# The bridge of one code-interpreter context (src/interpreter/): runs inside a sandbox as its user,
# started by the sandbox's agent, and drives the kernel that runs the context's cells, turning
# what it says into the output lines of E2B's code interpreter (stdout, stderr, result, error,
# number_of_executions). A python context's kernel is an ipykernel (through jupyter_client), so
# the display protocol, magics, `!` lines and interrupts are IPython's own; bash and javascript
# contexts run a bash, and a node with kernel-node.cjs, whose output is streamed from their pipes.
#
# Requests come on stdin and replies go to stdout, as length-prefixed JSON frames (4-byte
# big-endian length). The kernel is another process whose stdio is not the protocol: what a
# cell prints (os.write(1) included: ipykernel captures its fds) reaches the host as text inside
# an output line, never as a frame. The bridge makes itself not dumpable, so the cells (same uid)
# cannot open its pipes through /proc.
#
#   -> {"id": n, "op": "execute", "code": str, "env_vars": {str: str}}
#   <- {"id": n, "output": {...one output line...}} ... then {"id": n, "done": true}
#   -> {"id": n, "op": "interrupt"}     (also while an execute runs)  <- {"id": n}
#   -> {"id": n, "op": "restart"}       <- {"id": n}
# argv: the language, then for python the sources of charts.py and startup.py (which the kernel
# imports before the first cell), for javascript the source of kernel-node.cjs.
import codecs
import ctypes
import json
import os
import queue
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

VERSION = "1"
# A request frame longer than this is refused unread: a cell's code is far smaller.
MAX_REQUEST = 16 * 1024 * 1024
# One output line holds at most this much text of a stream; a longer message is cut, said so.
MAX_STREAM_TEXT = 1024 * 1024
# A result's formats together, as JSON: past it the result keeps a cut text and loses the rest.
MAX_RESULT_BYTES = 16 * 1024 * 1024
RESULT_TEXT_KEPT = 64 * 1024
# Chunks of 64 KiB read from a kernel's pipe at a time (a stream line holds at most MAX_STREAM_TEXT).
READS_PER_POLL = 16
# An interrupted cell that is still running after this has ignored SIGINT: the kernel restarts.
INTERRUPT_GRACE = 3.0
KERNEL_START_TIMEOUT = 60.0
PR_SET_DUMPABLE = 4

# Jupyter's mime types and the field each becomes in a result line (E2B's names).
FORMATS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
    "e2b/data": "data",
    "e2b/chart": "chart",
}


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


class IPythonKernel:
    """One ipykernel process and the client that talks to it, over unix sockets in a private directory."""

    language = "python"

    def __init__(self, sources):
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        self.directory = tempfile.mkdtemp(prefix="kernel-")
        for name in ("agent_runner_charts", "agent_runner_startup"):
            with open(os.path.join(self.directory, name + ".py"), "w") as module:
                module.write(sources[name])
        connection, _ = write_connection_file(os.path.join(self.directory, "connection.json"), transport="ipc",
                                              ip=os.path.join(self.directory, "socket"))
        self.log = open(os.path.join(self.directory, "kernel.log"), "w+b")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [self.directory, os.environ.get("PYTHONPATH")])))
        env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ipykernel_launcher", "-f", connection, "--IPKernelApp.exec_lines=import agent_runner_startup", "--HistoryManager.enabled=False"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env, close_fds=True,
            # A group of its own: a restart ends what its cells started (`!` lines, subprocesses) too.
            start_new_session=True,
        )
        self.client = BlockingKernelClient(connection_file=connection)
        self.client.load_connection_file()
        # No heartbeat: whether the kernel lives is its process's to say, and a kernel slow to
        # start (gVisor, an emulated VM) misses the heartbeat's one-second deadline.
        self.client.start_channels(hb=False)
        self.wait_until_ready()

    def wait_until_ready(self):
        """Until the kernel answers kernel_info and its iopub stream reaches the client (a subscription takes a moment)."""
        deadline = time.monotonic() + KERNEL_START_TIMEOUT
        while True:
            if not self.alive():
                raise RuntimeError("the kernel ended (%s) before it answered: %s" % (describe_exit(self.process.returncode), self.said()))
            if time.monotonic() > deadline:
                raise RuntimeError("the kernel did not answer in %d seconds: %s" % (KERNEL_START_TIMEOUT, self.said()))
            self.client.kernel_info()
            try:
                reply = self.client.get_shell_msg(timeout=1)
            except queue.Empty:
                continue
            if reply["msg_type"] != "kernel_info_reply":
                continue
            try:
                self.client.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            break
        while True:
            try:
                self.client.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                return

    def begin(self, code, silent):
        self.message_id = self.client.execute(code, silent=silent, store_history=not silent, allow_stdin=False, stop_on_error=True)
        self.errored = False

    def poll(self, timeout):
        """The output lines of the running cell that came, and whether it ended (its kernel idle again)."""
        try:
            message = self.client.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            return [], False
        if message.get("parent_header", {}).get("msg_id") != self.message_id:
            return [], False
        kind, content = message["msg_type"], message["content"]
        if kind == "status" and content.get("execution_state") == "idle":
            drain_shell(self.client)
            return [], True
        if kind == "execute_input":
            return [{"type": "number_of_executions", "execution_count": content["execution_count"]}], False
        if kind == "stream":
            return [stream_line(content, message["header"].get("date"))], False
        if kind in ("display_data", "execute_result"):
            return [result_line(content.get("data", {}), kind == "execute_result")], False
        if kind == "error" and not self.errored:
            self.errored = True
            return [error_line(content.get("ename", ""), content.get("evalue", ""), "\n".join(content.get("traceback", [])))], False
        return [], False

    def env_code(self, env_vars):
        return env_code(env_vars)

    def restore_env_code(self):
        return "__agent_runner_restore_env()"

    def said(self):
        self.log.seek(0)
        return self.log.read()[-4096:].decode("utf-8", "replace")

    def alive(self):
        return self.process.poll() is None

    def interrupt(self):
        # The kernel alone, as Jupyter interrupts: it raises KeyboardInterrupt in the cell.
        try:
            os.kill(self.process.pid, signal.SIGINT)
        except ProcessLookupError:
            pass  # ended already

    def stop(self):
        self.client.stop_channels()
        signal_group(self.process, signal.SIGKILL)
        self.process.wait()
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class ProcessKernel:
    """A kernel of our own for a language without an ipykernel here: a child process whose stdout
    and stderr are streamed as they come, which says on a control pipe (its fd CONTROL) when a
    cell has ended. Subclasses say how a cell is sent and what its end means."""

    def __init__(self, argv, cells_on_stdin, env=None):
        self.control_read, control_write = os.pipe()
        cells_read, self.cells_write = os.pipe()
        self.directory = None
        self.process = subprocess.Popen(
            argv + [str(control_write), str(cells_read)], stdin=cells_read if cells_on_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(control_write, cells_read), env=env, start_new_session=True,
        )
        os.close(control_write)
        os.close(cells_read)
        self.decoders = {}
        self.control = b""
        self.selector = selectors.DefaultSelector()
        for name, stream in (("stdout", self.process.stdout), ("stderr", self.process.stderr)):
            os.set_blocking(stream.fileno(), False)
            self.selector.register(stream.fileno(), selectors.EVENT_READ, name)
            self.decoders[name] = codecs.getincrementaldecoder("utf-8")("replace")
        os.set_blocking(self.control_read, False)
        self.selector.register(self.control_read, selectors.EVENT_READ, "control")

    def next_cell(self):
        self.cell = os.urandom(8).hex()
        return self.cell

    def send_cell(self, text):
        data = text.encode()
        while data:
            data = data[os.write(self.cells_write, data):]

    def poll(self, timeout):
        """The output lines that came, and whether the cell ended (its output all read by then)."""
        lines = []
        for key, _ in self.selector.select(timeout):
            if key.data == "control":
                self.control += self.read(key.fd)
            else:
                self.stream(key.fd, key.data, lines)
        report = self.take_report()
        if report is None:
            return lines, False
        # What the cell printed before it ended is in the pipes already: read to their end now.
        for key in list(self.selector.get_map().values()):
            if key.data != "control":
                self.stream(key.fd, key.data, lines)
        lines.extend(self.ended(report))
        return lines, True

    def take_report(self):
        """The running cell's end-of-cell report, once it came. The control fd is the cell's to
        write to as well (bash's is a variable away), so a report counts only with the token this
        cell was sent with, which the cell itself never sees; any other line is dropped."""
        while b"\n" in self.control:
            line, self.control = self.control.split(b"\n", 1)
            try:
                report = json.loads(line)
            except ValueError:
                continue
            if isinstance(report, dict) and report.get("cell") == self.cell:
                return report
        return None

    def read(self, fd):
        """What the pipe holds now, at most READS_PER_POLL chunks: a cell that writes without end
        must not keep the bridge from its interrupts."""
        chunks = []
        for _ in range(READS_PER_POLL):
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                self.selector.unregister(fd)
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def stream(self, fd, name, lines):
        text = self.decoders[name].decode(self.read(fd))
        if text:
            lines.append(stream_line({"name": name, "text": text}, None))

    def said(self):
        return ""


    def alive(self):
        return self.process.poll() is None

    def interrupt(self):
        signal_group(self.process, signal.SIGINT)

    def stop(self):
        # Its whole group: what its cells started in the background ends with it.
        signal_group(self.process, signal.SIGKILL)
        self.process.wait()
        for fd in (self.control_read, self.cells_write):
            os.close(fd)
        self.selector.close()


class BashKernel(ProcessKernel):
    """bash reading cells on its stdin, each run by eval from a quoted here-document (so no cell
    can end the one after it) with stdin from /dev/null; SIGINT stops the command, not bash."""

    language = "bash"

    def __init__(self, _sources):
        # -s: commands from stdin, a line at a time as they come; the two fds are $1 and $2.
        super().__init__(["/bin/bash", "--noprofile", "--norc", "-s"], True)
        self.send_cell('__agent_runner_control=$1; trap : INT\n')
        self.delimiter = "AGENT_RUNNER_CELL_%s" % os.urandom(8).hex()

    def begin(self, code, silent):
        self.send_cell("eval \"$(cat <<'%s'\n%s\n%s\n)\" </dev/null\nprintf '{\"status\": %%d, \"cell\": \"%s\"}\\n' $? >&\"$__agent_runner_control\"\n"
                       % (self.delimiter, code.replace(self.delimiter, ""), self.delimiter, self.next_cell()))

    def ended(self, report):
        if "error" in report:
            return reported_error(report["error"])
        status = report.get("status", 0)
        return [] if status == 0 else [error_line("ExitCode", str(status), "")]

    def env_code(self, env_vars):
        lines = []
        for key, value in env_vars.items():
            if not key.replace("_", "a").isalnum():
                continue
            lines.append("__agent_runner_old_%s=${%s-__AGENT_RUNNER_UNSET__}; export %s=%s" % (key, key, key, shell_quote(value)))
        self.restore = "\n".join(
            'if [ "$__agent_runner_old_%s" = __AGENT_RUNNER_UNSET__ ]; then unset %s; else export %s="$__agent_runner_old_%s"; fi' % (key, key, key, key)
            for key in env_vars if key.replace("_", "a").isalnum())
        return "\n".join(lines)

    def restore_env_code(self):
        return self.restore


class NodeKernel(ProcessKernel):
    """node running kernel-node.cjs (argv: its source): cells as JSON lines on a pipe, each run in
    one global context; the value and error come back on the control pipe."""

    language = "javascript"

    def __init__(self, sources):
        node = shutil.which("node") or "/usr/bin/node"
        super().__init__([node, "-e", sources["kernel-node"]], False)

    def begin(self, code, silent):
        self.send_cell(json.dumps({"code": code, "cell": self.next_cell()}) + "\n")

    def ended(self, report):
        lines = []
        if report.get("result") is not None:
            lines.append(result_line({"text/plain": str(report["result"])}, True))
        if report.get("error") is not None:
            lines.extend(reported_error(report["error"]))
        return lines

    def env_code(self, env_vars):
        return "globalThis.__agentRunnerRestoreEnv = ((vars) => { const old = {}; for (const [k, v] of Object.entries(vars)) { old[k] = process.env[k]; process.env[k] = v; }" \
            " return () => { for (const [k, v] of Object.entries(old)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; } }; })(%s); undefined" % json.dumps(env_vars)

    def restore_env_code(self):
        return "globalThis.__agentRunnerRestoreEnv(); delete globalThis.__agentRunnerRestoreEnv; undefined"


KERNELS = {"python": IPythonKernel, "bash": BashKernel, "javascript": NodeKernel}


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
        if env_vars:
            self.run_silently(self.kernel.env_code(env_vars))
        try:
            self.run(code, emit)
        finally:
            if env_vars and self.kernel.alive():
                self.run_silently(self.kernel.restore_env_code())
        self.protocol.send({"id": request_id, "done": True})

    def run_silently(self, code):
        self.run(code, lambda output: None, silent=True)

    def run(self, code, emit, silent=False):
        if not silent and not isinstance(self.kernel, IPythonKernel):
            self.executions += 1
            emit({"type": "number_of_executions", "execution_count": self.executions})
        self.kernel.begin(code, silent)
        interrupted_at = None
        while True:
            if self.take_interrupts() and interrupted_at is None:
                interrupted_at = time.monotonic()
            if not self.kernel.alive():
                said = self.kernel.said()
                self.replace_kernel("KernelDied", "the kernel ended (%s); the context restarted without its state"
                                    % describe_exit(self.kernel.process.returncode), said, emit)
                return
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
        """Answers the interrupts that came while a cell runs (true if any did); anything else waits its turn."""
        interrupted = False
        held = []
        while True:
            try:
                request = self.requests.get_nowait()
            except queue.Empty:
                break
            if request is not None and request.get("op") == "interrupt" and isinstance(request.get("id"), int):
                self.kernel.interrupt()
                interrupted = True
                self.protocol.send({"id": request["id"]})
            else:
                held.append(request)
        for request in held:
            self.requests.put(request)
        return interrupted


def signal_group(process, number):
    """Signals a kernel's process group (it leads one); nothing when it has ended with all of it."""
    try:
        os.killpg(process.pid, number)
    except ProcessLookupError:
        pass


def reported_error(error):
    """The error line of a kernel's end-of-cell report, whatever shape the report took."""
    error = error if isinstance(error, dict) else {"value": str(error)}
    return [error_line(str(error.get("name", "Error")), str(error.get("value", "")), str(error.get("traceback", "")))]


def shell_quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def env_code(env_vars):
    """Sets the run's variables in the kernel's os.environ, keeping what they were for the restore."""
    encoded = json.dumps(json.dumps({str(key): str(value) for key, value in env_vars.items()}))
    return (
        "def __agent_runner_env(new):\n"
        "    import os\n"
        "    old = {key: os.environ.get(key) for key in new}\n"
        "    os.environ.update(new)\n"
        "    def restore():\n"
        "        for key, value in old.items():\n"
        "            if value is None:\n"
        "                os.environ.pop(key, None)\n"
        "            else:\n"
        "                os.environ[key] = value\n"
        "    globals()['__agent_runner_restore_env'] = restore\n"
        "import json as __agent_runner_json\n"
        "__agent_runner_env(__agent_runner_json.loads(%s))\n"
        "del __agent_runner_env, __agent_runner_json\n" % encoded
    )


def drain_shell(client):
    """The execute replies: the iopub stream said all they say, but unread they pile up."""
    while True:
        try:
            client.get_shell_msg(timeout=0)
        except queue.Empty:
            return


def stream_line(content, date):
    text = content.get("text", "")
    if len(text) > MAX_STREAM_TEXT:
        text = text[:MAX_STREAM_TEXT] + "\n[output cut: one write of %d characters, the first %d kept]\n" % (len(text), MAX_STREAM_TEXT)
    line = {"type": "stderr" if content.get("name") == "stderr" else "stdout", "text": text}
    if date is not None:
        line["timestamp"] = date if isinstance(date, str) else date.isoformat()
    return line


def result_line(data, is_main):
    line = {"type": "result", "is_main_result": is_main}
    extra = {}
    for mime, value in data.items():
        field = FORMATS.get(mime)
        if field is None:
            extra[mime] = value
        else:
            line[field] = value
    if extra:
        line["extra"] = extra
    size = len(json.dumps(line))
    if size > MAX_RESULT_BYTES:
        kept = str(line.get("text", ""))[:RESULT_TEXT_KEPT]
        line = {"type": "result", "is_main_result": is_main,
                "text": "%s\n[result cut: its formats were %d bytes, more than the %d a result may carry; the first %d characters of its text kept]"
                % (kept, size, MAX_RESULT_BYTES, len(kept))}
    return line


def error_line(name, value, traceback):
    return {"type": "error", "name": name, "value": cut(value, "error"), "traceback": cut(traceback, "traceback")}


def cut(text, what):
    """At most MAX_STREAM_TEXT characters of an error's text: an exception's message is the cell's to size."""
    if len(text) <= MAX_STREAM_TEXT:
        return text
    return text[:MAX_STREAM_TEXT] + "\n[%s cut: %d characters, the first %d kept]" % (what, len(text), MAX_STREAM_TEXT)


def describe_exit(code):
    if code is not None and code < 0:
        return "killed by signal %d%s" % (-code, ", out of memory?" if -code == signal.SIGKILL else "")
    return "exit status %s" % code


def main():
    protocol = Protocol()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    language = sys.argv[1]
    names = {"python": ("agent_runner_charts", "agent_runner_startup"), "javascript": ("kernel-node",), "bash": ()}[language]
    sources = dict(zip(names, sys.argv[2:]))
    try:
        bridge = Bridge(protocol, language, sources)
    except Exception as error:  # the kernel did not start: said once, then the context is over
        protocol.send({"ready": False, "error": "%s: %s" % (type(error).__name__, error)})
        return 1
    try:
        bridge.serve()
    finally:
        bridge.kernel.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
