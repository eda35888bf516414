# The bridge of one code-interpreter context (src/interpreter/): runs inside a sandbox as its user,
# started by the sandbox's agent, and drives a Jupyter kernel (ipykernel, through jupyter_client)
# that runs the context's cells. It turns the kernel's messages into the output lines of E2B's
# code interpreter (stdout, stderr, result, error, number_of_executions), so the display
# protocol, magics, `!` lines and interrupts are IPython's own.
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
# argv: the sources of charts.py and startup.py, which the kernel imports before the first cell.
import ctypes
import json
import os
import queue
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


class Kernel:
    """One ipykernel process and the client that talks to it, over unix sockets in a private directory."""

    def __init__(self, sources):
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        self.directory = tempfile.mkdtemp(prefix="kernel-")
        for name, source in sources.items():
            with open(os.path.join(self.directory, name + ".py"), "w") as module:
                module.write(source)
        connection, _ = write_connection_file(os.path.join(self.directory, "connection.json"), transport="ipc",
                                              ip=os.path.join(self.directory, "socket"))
        self.log = open(os.path.join(self.directory, "kernel.log"), "w+b")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [self.directory, os.environ.get("PYTHONPATH")])))
        env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ipykernel_launcher", "-f", connection, "--IPKernelApp.exec_lines=import agent_runner_startup"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env, close_fds=True,
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

    def said(self):
        self.log.seek(0)
        return self.log.read()[-4096:].decode("utf-8", "replace")

    def alive(self):
        return self.process.poll() is None

    def interrupt(self):
        if self.alive():
            os.kill(self.process.pid, signal.SIGINT)

    def stop(self):
        self.client.stop_channels()
        if self.alive():
            self.process.kill()
        self.process.wait()
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class Bridge:
    def __init__(self, protocol, sources):
        self.protocol = protocol
        self.sources = sources
        self.requests = queue.Queue()
        self.kernel = Kernel(sources)
        # Why the kernel was last replaced under a cell, told to the next cell too: the client of
        # the cell it happened to may have left already (a timeout).
        self.notice = None

    def serve(self):
        threading.Thread(target=read_requests, args=(self.requests,), daemon=True).start()
        self.protocol.send({"ready": True, "version": VERSION, "language": "python"})
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
        self.kernel = Kernel(self.sources)

    def execute(self, request_id, code, env_vars):
        def emit(output):
            self.protocol.send({"id": request_id, "output": output})

        if self.notice is not None:
            emit({"type": "stderr", "text": "[%s]\n" % self.notice})
            self.notice = None
        if env_vars:
            self.run_silently(env_code(env_vars))
        try:
            self.run(code, emit)
        finally:
            if env_vars and self.kernel.alive():
                self.run_silently("__agent_runner_restore_env()")
        self.protocol.send({"id": request_id, "done": True})

    def run_silently(self, code):
        self.run(code, lambda output: None, silent=True)

    def run(self, code, emit, silent=False):
        client = self.kernel.client
        message_id = client.execute(code, silent=silent, store_history=not silent, allow_stdin=False, stop_on_error=True)
        interrupted_at = None
        errored = False
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
            try:
                message = client.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            if message.get("parent_header", {}).get("msg_id") != message_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "status" and content.get("execution_state") == "idle":
                drain_shell(client)
                return
            if kind == "execute_input":
                emit({"type": "number_of_executions", "execution_count": content["execution_count"]})
            elif kind == "stream":
                emit(stream_line(content, message["header"].get("date")))
            elif kind in ("display_data", "execute_result"):
                emit(result_line(content.get("data", {}), kind == "execute_result"))
            elif kind == "error" and not errored:
                errored = True
                emit(error_line(content.get("ename", ""), content.get("evalue", ""), "\n".join(content.get("traceback", []))))

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
    text = line.get("text")
    # E2B shows a string result without its quotes.
    if isinstance(text, str) and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        line["text"] = text[1:-1]
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
    return {"type": "error", "name": name, "value": value, "traceback": traceback}


def describe_exit(code):
    if code is not None and code < 0:
        return "killed by signal %d%s" % (-code, ", out of memory?" if -code == signal.SIGKILL else "")
    return "exit status %s" % code


def main():
    protocol = Protocol()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    sources = {"agent_runner_charts": sys.argv[1], "agent_runner_startup": sys.argv[2]}
    try:
        bridge = Bridge(protocol, sources)
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
