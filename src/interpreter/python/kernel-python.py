# A code-interpreter context's python kernel: IPython's own InteractiveShell (the display
# protocol, magics, `!` lines, tracebacks and KeyboardInterrupt on SIGINT are IPython's), driven
# over two pipes instead of Jupyter's sockets. Started by kernel-bridge.py as
# `python3 -c SOURCE MAX_RESULT_BYTES CONTROL_FD CELLS_FD`: cells come as JSON lines on CELLS_FD,
# `{"code", "cell", "silent"}`;
# what a cell shows goes out on CONTROL_FD as JSON lines carrying the cell's token, in the order it
# happened: {"cell", "stream": "stdout"|"stderr", "text"}, {"cell", "display": {mime: data},
# "main": bool, "oversized"?: bytes} (the last expression is the main one; a result over
# MAX_RESULT_BYTES as JSON is sent as the start of its text and its size), {"cell", "error": {"name", "value",
# "traceback"}}, then {"cell", "done": true}. What is written to fds 1 and 2 beneath python (a `!`
# line, a subprocess) the bridge reads from the process's pipes.
import base64
import importlib
import json
import os
import signal
import sys
import threading

from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

# Text a cell prints is sent at a line's end, or once this much is held.
STREAM_HOLD = 64 * 1024
# What is kept of the text of a result over the limit the bridge gives.
RESULT_TEXT_KEPT = 64 * 1024


class Control:
    """The control pipe, and the token of the cell that runs (nothing is sent outside a cell)."""

    def __init__(self, fd, max_result):
        self.fd = fd
        self.max_result = max_result
        self.cell = None
        self.lock = threading.Lock()

    def send(self, **fields):
        """One report, whole: on a line of its own (a newline first ends whatever a cell left half
        written on the fd), from one thread at a time, and not cut by an interrupt."""
        if self.cell is None:
            return
        data = ("\n" + json.dumps(dict(fields, cell=self.cell), default=str) + "\n").encode()
        with self.lock:
            held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                while data:
                    data = data[os.write(self.fd, data):]
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def show(self, data, main):
        """A result in its formats; one over the bridge's limit goes as the start of its text and its size (the bridge says so)."""
        # Binary formats (a _repr_png_ that returns bytes) travel in base64, as Jupyter sends them.
        data = {mime: base64.b64encode(value).decode() if isinstance(value, bytes) else value for mime, value in data.items()}
        size = len(json.dumps(data, default=str))
        if size <= self.max_result:
            self.send(display=data, main=main)
        else:
            self.send(display={"text/plain": str(data.get("text/plain", ""))[:RESULT_TEXT_KEPT]}, main=main, oversized=size)


class Stream:
    """sys.stdout or sys.stderr of the kernel: text held to a line's end, then sent in order with
    what else the cell shows (a display flushes both streams first)."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, control, name):
        self.control = control
        self.name = name
        self.held = []
        self.size = 0

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        if not text:
            # Nothing to say (IPython's `!` lines end with print("", end="")): no empty stream line.
            return 0
        self.held.append(text)
        self.size += len(text)
        if "\n" in text or self.size >= STREAM_HOLD:
            self.flush()
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        if self.held:
            text = "".join(self.held)
            self.held, self.size = [], 0
            self.control.send(stream=self.name, text=text)

    def isatty(self):
        return False

    def readable(self):
        return False

    def writable(self):
        return True

    def fileno(self):
        # What asks for the descriptor (faulthandler, subprocess) gets the process's own.
        return 1 if self.name == "stdout" else 2


def flush_streams():
    sys.stdout.flush()
    sys.stderr.flush()


class Publisher(DisplayPublisher):
    """display(): each shown object, in every format it has."""

    control = None

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        flush_streams()
        self.control.show(data, False)

    def clear_output(self, wait=False):
        pass


class ResultHook(DisplayHook):
    """The cell's last expression: its formats, as the main result (no Out[] prompt printed)."""

    control = None

    def start_displayhook(self):
        pass

    def write_output_prompt(self):
        pass

    def write_format_data(self, format_dict, md_dict=None):
        flush_streams()
        self.control.show(format_dict, True)

    def finish_displayhook(self):
        pass


def main():
    control = Control(int(sys.argv[2]), max_result=int(sys.argv[1]))
    cells = os.fdopen(int(sys.argv[3]), "rb")
    Publisher.control = control
    ResultHook.control = control
    config = Config()
    # No history file: a context's cells are its own, and the sandbox's disk the user's.
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config, display_pub_class=Publisher, displayhook_class=ResultHook, colors="Neutral")

    def show_traceback(etype, evalue, stb):
        flush_streams()
        control.send(error={"name": etype.__name__ if etype else "Error", "value": str(evalue), "traceback": "\n".join(stb)})

    shell._showtraceback = show_traceback
    # E2B's formats, before the first cell (the bridge put the module on the path).
    importlib.import_module("agent_runner_startup")

    # From here what python prints is the cells' (a failure to start went to the bridge as it is).
    sys.stdout = Stream(control, "stdout")
    sys.stderr = Stream(control, "stderr")
    os.write(control.fd, b'{"ready": true}\n')
    while True:
        # An interrupt is for a running cell: between cells (reading one, saying it ended) it is ignored.
        line = cells.readline()
        if not line:
            return
        request = json.loads(line)
        control.cell = request["cell"]
        silent = request.get("silent", False)
        ran = False
        try:
            # Set anew for every cell, whatever an earlier cell did with SIGINT.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            # From here an interrupt stops the cell: the bridge holds one until it reads this.
            control.send(started=True)
            shell.run_cell(request["code"], store_history=not silent, silent=silent)
            ran = True
        except KeyboardInterrupt:
            # One that came as the cell ended, before it was ignored again, stops nothing. One that
            # came before IPython ran the cell (or outside what IPython catches) stopped the cell.
            if not ran:
                control.send(error={"name": "KeyboardInterrupt", "value": "", "traceback": "KeyboardInterrupt"})
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        flush_streams()
        control.send(done=True)
        control.cell = None


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    main()
