# The kernels of a code-interpreter context's bridge (kernel-bridge.py), each a process of its own
# that the bridge starts, sends cells to and reads: for python IPython's InteractiveShell
# (kernel-python.py), so the display protocol, magics, `!` lines and interrupts are IPython's; for
# bash a bash; for javascript a node with kernel-node.cjs; for java a JVM running JavaKernel.java
# (JShell's API); for r an R running kernel-r.R. Their output is streamed from their pipes, and
# what a cell showed and when it ended comes on a control pipe; both become E2B's output lines
# (bridge-lines.py). Runs inside a sandbox as its user, in the bridge's own process: the bridge is
# given this source on its argv (the sandbox may have no copy of our files) and loads it as the
# module bridge_kernels, after bridge_lines, which it imports.
import codecs
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from bridge_lines import MAX_RESULT_BYTES, error_line, reported_error, result_line, stream_line

# Chunks of 64 KiB read from a kernel's pipe at a time (a stream line holds at most MAX_STREAM_TEXT).
READS_PER_POLL = 16
# A kernel that has used this much CPU without saying it is up will not come up (IPython takes
# about half a second of CPU natively); one that uses none is waiting on something, and is given
# up after the wall bound. A wall clock of 60 s failed on a loaded host: a microVM's IPython,
# sharing 2 cores with other VMs, was still importing. In a VM under software emulation the
# guest's CPU time passes at the wall clock's pace while it computes: that IPython used 60 s of it
# in 68 s, hence a CPU bound of minutes.
KERNEL_START_CPU_SECONDS = 300.0
KERNEL_START_WALL_SECONDS = 600.0


class ProcessKernel:
    """A kernel process whose stdout and stderr are streamed as they come, which reports on a
    control pipe (its fd CONTROL) what a cell showed and when it ended. Subclasses say how a cell
    is sent and what its reports mean."""

    # Seconds after which an interrupted cell that still runs is sent SIGINT again (None: once).
    INTERRUPT_AGAIN = None
    # A temporary directory of the kernel's files (its modules, its program), removed when it stops.
    directory = None
    # True: a run's env vars go to begin() with its cell, which the kernel sets and restores
    # itself; False: they are set and restored by cells of env_code() and restore_env_code().
    ENV_WITH_CELL = False

    def __init__(self, argv, cells_on_stdin, env=None):
        # The cell under way (its token), and where its interrupt stands: see interrupt().
        self.cell = None
        self.started = False
        self.interrupt_pending = False
        self.interrupted_at = None
        self.signalled_at = None
        self.control_read, control_write = os.pipe()
        cells_read, self.cells_write = os.pipe()
        self.stopped = False
        self.process = subprocess.Popen(
            argv + [str(control_write), str(cells_read)], stdin=cells_read if cells_on_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(control_write, cells_read), env=env, start_new_session=True,
        )
        os.close(control_write)
        os.close(cells_read)
        self.decoders = {}
        # A bytearray grows in place: a long report (a large result) arrives in many reads.
        self.control = bytearray()
        self.selector = selectors.DefaultSelector()
        for name, stream in (("stdout", self.process.stdout), ("stderr", self.process.stderr)):
            os.set_blocking(stream.fileno(), False)
            self.selector.register(stream.fileno(), selectors.EVENT_READ, name)
            self.decoders[name] = codecs.getincrementaldecoder("utf-8")("replace")
        os.set_blocking(self.control_read, False)
        self.selector.register(self.control_read, selectors.EVENT_READ, "control")

    def wait_until_ready(self):
        """Until the kernel says it is up on its control pipe (IPython imported, E2B's formats in
        place; a JVM's JShell compiling); why not, if it ends first. One that does not come up is
        stopped."""
        try:
            self.wait_for_ready_report()
        except Exception:
            self.stop()
            raise

    def wait_for_ready_report(self):
        began = time.monotonic()
        said = b""
        while b"\n" not in self.control:
            used, waited = cpu_seconds(self.process.pid), time.monotonic() - began
            if used > KERNEL_START_CPU_SECONDS or waited > KERNEL_START_WALL_SECONDS:
                raise RuntimeError("the kernel did not start: it used %.1f s of CPU in %.0f s (bounds: %d s of CPU, %d s)"
                                   % (used, waited, KERNEL_START_CPU_SECONDS, KERNEL_START_WALL_SECONDS))
            alive = self.alive()
            for key, _ in self.selector.select(0.1):
                data = self.read(key.fd)
                if key.data == "control":
                    self.control += data
                else:
                    said += data
            if not alive and b"\n" not in self.control:
                raise RuntimeError("the kernel ended (%s) before it was up: %s"
                                   % (describe_exit(self.process.returncode), said.decode("utf-8", "replace").strip()[-2000:]))
        del self.control[:self.control.find(b"\n") + 1]

    def next_cell(self):
        self.cell = os.urandom(8).hex()
        self.started = False
        self.interrupt_pending = False
        self.interrupted_at = None
        return self.cell

    def send_cell(self, text):
        data = text if isinstance(text, bytes) else text.encode()
        while data:
            data = data[os.write(self.cells_write, data):]

    def poll(self, timeout):
        """The output lines that came, and whether the cell ended (its output all read by then)."""
        lines = []
        ended_line = False
        for key, _ in self.selector.select(timeout):
            if key.data == "control":
                data = self.read(key.fd)
                self.control += data
                ended_line = ended_line or b"\n" in data
            else:
                self.stream(key.fd, key.data, lines)
        # Lines are looked for only when one ended: a report of 100 MB is not scanned a read at a time.
        for report in self.take_reports() if ended_line else []:
            if report.get("started"):
                self.cell_started()
                continue
            if not report.get("done"):
                lines.extend(self.shown(report))
                continue
            # What the cell printed before it ended is in the pipes already: read to their end now.
            for key in list(self.selector.get_map().values()):
                if key.data != "control":
                    self.stream(key.fd, key.data, lines)
            lines.extend(self.ended(report))
            self.cell = None
            return lines, True
        return lines, False

    def take_reports(self):
        """The running cell's reports that came, up to its end. The control fd is the cell's to
        write to as well (bash's is a variable away), so a report counts only with the token this
        cell was sent with, which a bash or node cell never sees; any other line is dropped."""
        reports = []
        while (end := self.control.find(b"\n")) >= 0:
            line = bytes(self.control[:end])
            del self.control[:end + 1]
            try:
                report = json.loads(line)
            except ValueError:
                continue
            if isinstance(report, dict) and report.get("cell") == self.cell:
                reports.append(report)
                if report.get("done"):
                    break
        return reports

    def shown(self, _report):
        """The output lines of a report the cell sent before its end (a python kernel's)."""
        return []

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
            lines.append(stream_line(name, text))


    def alive(self):
        return self.process.poll() is None

    def interrupt(self):
        """Interrupts the running cell. Until the kernel says the cell started, the kernel is still
        reading it with SIGINT ignored (between cells it is), so the signal waits for that report:
        sent earlier, a busy host could let it land before the cell's handler and be lost."""
        if self.cell is None:
            return
        if not self.started:
            self.interrupt_pending = True
            return
        signal_group(self.process, signal.SIGINT)
        self.signalled_at = time.monotonic()
        if self.interrupted_at is None:
            self.interrupted_at = self.signalled_at

    def keep_interrupting(self):
        """Sends an interrupted cell's interrupt again, for kernels whose SIGINT stops one command
        of a cell rather than the cell (INTERRUPT_AGAIN set)."""
        if self.INTERRUPT_AGAIN is not None and self.interrupted_at is not None and time.monotonic() - self.signalled_at > self.INTERRUPT_AGAIN:
            self.interrupt()

    def cell_started(self):
        self.started = True
        if self.interrupt_pending:
            self.interrupt()

    def stop(self):
        """Ends it (once: a failed restart leaves the last kernel to the bridge's own end too)."""
        if self.stopped:
            return
        self.stopped = True
        # Its whole group: what its cells started in the background ends with it.
        signal_group(self.process, signal.SIGKILL)
        self.process.wait()
        for fd in (self.control_read, self.cells_write):
            os.close(fd)
        self.selector.close()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


class BashKernel(ProcessKernel):
    """bash reading cells on its stdin, each run by eval from a quoted here-document (so no cell
    can end the one after it) with stdin from /dev/null; SIGINT stops the command, not bash."""

    language = "bash"
    # SIGINT stops the command running, and the cell goes on to its next one; one that came
    # between two commands reaches only bash's trap. Sent again until the cell ends, it stops the
    # cell, as Ctrl-C stops what a terminal runs.
    INTERRUPT_AGAIN = 0.2

    def __init__(self, _sources):
        # -s: commands from stdin, a line at a time as they come; the two fds are $1 and $2.
        super().__init__(["/bin/bash", "--noprofile", "--norc", "-s"], True)
        self.send_cell('__agent_runner_control=$1; trap : INT\n')
        self.delimiter = "AGENT_RUNNER_CELL_%s" % os.urandom(8).hex()

    def begin(self, code, silent):
        cell = self.next_cell()
        # The cell's start is said inside the text eval runs, on its first line (line numbers stay
        # the cell's): an interrupt sent after it cannot cut the here-document being read.
        started = "printf '\\n{\"started\": true, \"cell\": \"%s\"}\\n' >&\"$__agent_runner_control\"; " % cell
        self.send_cell("eval \"$(cat <<'%s'\n%s%s\n%s\n)\" </dev/null\nprintf '\\n{\"done\": true, \"status\": %%d, \"cell\": \"%s\"}\\n' $? >&\"$__agent_runner_control\"\n"
                       % (self.delimiter, started, code.replace(self.delimiter, ""), self.delimiter, cell))

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
    # One SIGINT: the kernel reports a cell started once node's watchdog holds SIGINT for it. Sent
    # again, one could land as the cell ends, where node has no handler for it and dies of it.

    def __init__(self, sources):
        # The node the host resolved for the context (a session's toolchain), else the sandbox's own.
        node = sources.get("node") or shutil.which("node") or "/usr/bin/node"
        # --expose-internals: the kernel rewrites top-level-await cells with node's REPL's own
        # rewrite (internal/repl/await), so their declarations and value are the context's.
        super().__init__([node, "--expose-internals", "-e", sources["kernel-node"]], False)

    def begin(self, code, silent):
        self.send_cell(json.dumps({"code": code, "cell": self.next_cell()}) + "\n")

    def ended(self, report):
        return value_and_error(report)

    def env_code(self, env_vars):
        return "globalThis.__agentRunnerRestoreEnv = ((vars) => { const old = {}; for (const [k, v] of Object.entries(vars)) { old[k] = process.env[k]; process.env[k] = v; }" \
            " return () => { for (const [k, v] of Object.entries(old)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; } }; })(%s); undefined" % json.dumps(env_vars)

    def restore_env_code(self):
        return "globalThis.__agentRunnerRestoreEnv(); delete globalThis.__agentRunnerRestoreEnv; undefined"


class PythonKernel(ProcessKernel):
    """IPython's InteractiveShell in a process of its own (kernel-python.py, argv: its source),
    what a cell shows sent on the control pipe as it happens, each with the cell's token."""

    language = "python"

    def __init__(self, sources):
        directory = tempfile.mkdtemp(prefix="kernel-")
        for name in ("agent_runner_charts", "agent_runner_startup"):
            with open(os.path.join(directory, name + ".py"), "w") as module:
                module.write(sources[name])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [directory, os.environ.get("PYTHONPATH")])),
                   # IPython's profile and caches stay out of the user's home.
                   IPYTHONDIR=os.path.join(directory, "ipython"))
        env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        super().__init__([sys.executable, "-c", sources["kernel-python"], str(MAX_RESULT_BYTES)], False, env)
        self.directory = directory
        self.errored = False
        self.wait_until_ready()

    def begin(self, code, silent):
        self.errored = False
        self.send_cell(json.dumps({"code": code, "cell": self.next_cell(), "silent": silent}) + "\n")

    def shown(self, report):
        if "stream" in report:
            return [stream_line(str(report["stream"]), str(report.get("text", "")))]
        if isinstance(report.get("display"), dict):
            return [result_line(report["display"], report.get("main") is True, report.get("oversized"))]
        if isinstance(report.get("error"), dict) and not self.errored:
            self.errored = True
            return reported_error(report["error"])
        return []

    def ended(self, _report):
        return []

    def env_code(self, env_vars):
        return env_code(env_vars)

    def restore_env_code(self):
        return "__agent_runner_restore_env()"



class SourceKernel(ProcessKernel):
    """A kernel that is a program of ours in the kernel's language, written to a temporary
    directory and run from there, reading cells as length-prefixed strings (a line with the byte
    length, then the bytes: the token, the code, the number of env vars, each var's name and
    value; the kernel sets the run's vars and puts them back itself) and reporting its value and
    error when the cell ends."""

    ENV_WITH_CELL = True

    def write_program(self, name, source):
        self.directory = tempfile.mkdtemp(prefix="kernel-")
        path = os.path.join(self.directory, name)
        with open(path, "w") as program:
            program.write(source)
        return path

    def start(self, argv, env=None):
        super().__init__(argv, False, env)
        self.wait_until_ready()

    def begin(self, code, silent, env_vars=None):
        env_vars = env_vars or {}
        parts = [self.next_cell(), code, str(len(env_vars))]
        for key, value in env_vars.items():
            parts += [str(key), str(value)]
        encoded = [part.encode("utf-8", "replace") for part in parts]
        self.send_cell(b"".join(b"%d\n%s" % (len(part), part) for part in encoded))

    def ended(self, report):
        return value_and_error(report)



def value_and_error(report):
    """The output lines of a kernel's end-of-cell report that carries the cell's value and error."""
    lines = []
    if report.get("result") is not None:
        lines.append(result_line({"text/plain": str(report["result"])}, True))
    if report.get("error") is not None:
        lines.extend(reported_error(report["error"]))
    return lines


def installed_program(name, package):
    """The sandbox's `name` (on its PATH, else in /usr/bin); refused, naming `package`, without one."""
    program = shutil.which(name) or ("/usr/bin/" + name if os.path.exists("/usr/bin/" + name) else None)
    if program is None:
        raise RuntimeError("%s is not installed in the sandbox (%s)" % (name, package))
    return program


class JavaKernel(SourceKernel):
    """JShell's API in a JVM of its own: java running JavaKernel.java (argv: its source) as a
    single-file program. Cells come as length-prefixed strings on a pipe (the token, the code, the
    run's env vars, which the kernel sets as system properties as E2B's java kernel does); the
    value and error come back on the control pipe."""

    language = "java"

    def __init__(self, sources):
        java = installed_program("java", "a JDK 17 or later: default-jdk-headless")
        # The source launcher wants a file named for its class.
        path = self.write_program("JavaKernel.java", sources["kernel-java"])
        # Serial GC: one kernel, a heap of its own; no GC threads per core.
        self.start([java, "-XX:+UseSerialGC", "-Xshare:auto", path])


class RKernel(SourceKernel):
    """R running kernel-r.R (argv: its source): cells as length-prefixed strings on a pipe (the
    token, the code, the run's env vars, which the kernel sets with Sys.setenv for the run); the
    value (as R prints it) and error come back on the control pipe."""

    language = "r"

    def __init__(self, sources):
        r = installed_program("R", "r-base-core: scripts/setup-host.sh")
        path = self.write_program("kernel-r.R", sources["kernel-r"])
        # A UTF-8 locale unless the sandbox set one: R would print other text as <U+00E9>.
        env = dict(os.environ)
        if not env.get("LC_ALL") and not env.get("LANG"):
            env["LANG"] = "C.UTF-8"
        self.start([r, "--no-echo", "--no-restore", "--no-save", "-f", path, "--args"], env)


KERNELS = {"python": PythonKernel, "bash": BashKernel, "javascript": NodeKernel, "java": JavaKernel, "r": RKernel}


def signal_group(process, number):
    """Signals a kernel's process group (it leads one); nothing when it has ended with all of it."""
    try:
        os.killpg(process.pid, number)
    except ProcessLookupError:
        pass


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


def cpu_seconds(pid):
    """The CPU time (user and system) process `pid` has used, from /proc; 0 once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as stat:
            # After the command's ")": the state is field 3, utime and stime fields 14 and 15.
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def describe_exit(code):
    if code is not None and code < 0:
        return "killed by signal %d%s" % (-code, ", out of memory?" if -code == signal.SIGKILL else "")
    return "exit status %s" % code
