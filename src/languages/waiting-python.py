# A python that starts before its program is known and waits for it on stdin: a snippet's job
# (src/runner/snippet.ts), run as `python3 -c WAITING` (python.ts) in a sandbox pre-started for
# the language, its stdin the job's pipe from the host: one JSON line `{"source": PATH, "bytes":
# N, "args": [...]}`, then the program's N bytes; whatever follows is the program's own stdin,
# untouched (read here with os.read, byte-exact, never buffered). It then runs as `python3 PATH
# ARGS...` would: the file written at PATH, `__main__` with its `__file__`, `sys.argv`,
# `sys.path[0]` the program's directory, and a traceback that starts at the program's own frames.
# Used by one job only: its sandbox ends with it.
import json

def _run():
    import os, sys

    def read_exact(count):
        parts = []
        while count > 0:
            part = os.read(0, count)
            if not part:
                os._exit(70)
            parts.append(part)
            count -= len(part)
        return b"".join(parts)

    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(0, 1)
        if not byte:
            os._exit(70)
        line += byte
    header = json.loads(line)
    source = read_exact(header["bytes"])
    path = header["source"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.chdir(os.path.dirname(path))
    with open(path, "wb") as file:
        file.write(source)
    sys.argv[:] = [path] + header["args"]
    sys.path[0] = os.path.dirname(path)

    def hook(kind, value, trace):
        while trace is not None and trace.tb_frame.f_code.co_filename != path:
            trace = trace.tb_next
        sys.__excepthook__(kind, value.with_traceback(trace), trace)

    sys.excepthook = hook
    code = compile(source, path, "exec")
    main = sys.modules["__main__"].__dict__
    for name in [name for name in main if name not in ("__name__", "__builtins__")]:
        del main[name]
    main.update(__file__=path, __doc__=None, __spec__=None, __cached__=None, __loader__=None)
    exec(code, main)
    # The program ended normally: do what interpreter shutdown does that anyone could see (wait
    # for its threads, run its atexit handlers, flush the standard streams), then leave without
    # tearing the interpreter down, which costs more than the program (the sandbox goes with it).
    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()
    import atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(0)

_run()
