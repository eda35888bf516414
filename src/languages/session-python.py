# A session's python: one interpreter that lives across requests, started as
# `python3 -c KERNEL WORK_DIR` (python.ts) by the session's launcher (session/kernel-launcher.ts).
# Requests and replies are length-prefixed JSON frames (as everywhere else) on fds 3 and 4;
# fds 1 and 2 are files, so a cell's output, and that of the processes it starts, is read back
# from them after the cell and the files emptied for the next. Operations:
# - `cell`: runs code in `__main__`, where names persist between cells; the value of a last
#   expression comes back as its repr. A timeout raises KeyboardInterrupt in the cell (SIGALRM):
#   the interpreter and its names stay.
# - `command`: runs argv in the work dir in its own process group, output capped, killed whole
#   at its timeout.
# - `write` / `read`: a file of the work dir (the host has checked the path's form; the kernel
#   refuses one whose links lead out of the work dir, though the sandbox is the boundary).
# The host treats every reply as untrusted: a cell can write to these fds as well.
def _kernel():
    import os, sys, ast, base64, errno, json, linecache, signal, stat, struct, traceback
    work = sys.argv[1]
    # The launcher (session/kernel-launcher.ts) left the protocol on fds 3 and 4, and fds 1 and 2
    # on the capture files: the processes a cell starts need neither protocol fd.
    proto_in, proto_out = 3, 4
    os.set_inheritable(proto_in, False)
    os.set_inheritable(proto_out, False)
    readers = {name: os.open("/tmp/.session/" + name, os.O_RDONLY) for name in ("stdout", "stderr")}
    os.chdir(work)
    sys.path[0] = work
    main = sys.modules["__main__"].__dict__
    for name in [name for name in main if name not in ("__name__", "__builtins__", "__doc__")]:
        del main[name]

    def read_exact(count):
        parts = []
        while count > 0:
            part = os.read(proto_in, count)
            if not part:
                os._exit(0)
            parts.append(part)
            count -= len(part)
        return b"".join(parts)

    def send(message):
        payload = json.dumps(message).encode()
        data = struct.pack(">I", len(payload)) + payload
        while data:
            data = data[os.write(proto_out, data):]

    def captured(limit):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        out = {}
        for fd, name in ((1, "stdout"), (2, "stderr")):
            size = os.fstat(fd).st_size
            out[name] = os.pread(readers[name], min(size, limit), 0).decode("utf-8", "replace")
            out[name + "_bytes"] = size
            os.ftruncate(fd, 0)
        return out

    def cut(text, limit):
        # At most `limit` bytes of UTF-8 (whole characters), and the size it had: the host keeps
        # no more, and a reply that outgrew the channel's frame maximum would end the session.
        data = text.encode("utf-8", "surrogatepass")
        if len(data) <= limit:
            return text, len(data)
        return data[:limit].decode("utf-8", "ignore"), len(data)

    state = {"cell": 0, "timed_out": False, "running": False}

    def on_alarm(signum, frame):
        if state["running"]:
            state["timed_out"] = True
            raise KeyboardInterrupt("the cell ran past its timeout")

    signal.signal(signal.SIGALRM, on_alarm)

    def cell(request):
        state["cell"] += 1
        name = "<cell %d>" % state["cell"]
        code = request["code"]
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        reply = {"status": "ok", "error": None, "value": None, "exit_code": 0}
        state["timed_out"] = False
        try:
            tree = ast.parse(code, name, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            state["running"] = True
            signal.setitimer(signal.ITIMER_REAL, request["timeout_ms"] / 1000)
            try:
                exec(compile(tree, name, "exec"), main)
                if last is not None:
                    value = eval(compile(last, name, "eval"), main)
                    if value is not None:
                        reply["value"] = repr(value)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                state["running"] = False
        except SystemExit as stop:
            code = stop.code
            reply.update(status="error", exit_code=code if isinstance(code, int) else (0 if code is None else 1), error="SystemExit: %s" % (code,))
        except BaseException as error:
            timed_out = state["timed_out"] and isinstance(error, KeyboardInterrupt)
            # Only the cell's own frames: the kernel's are noise (and the timeout's handler is ours).
            trace = error.__traceback__
            while trace is not None and trace.tb_frame.f_code.co_filename != name:
                trace = trace.tb_next
            last_own = trace
            while last_own is not None and last_own.tb_next is not None:
                if not last_own.tb_next.tb_frame.f_code.co_filename.startswith("<cell ") and timed_out:
                    last_own.tb_next = None
                else:
                    last_own = last_own.tb_next
            error = error.with_traceback(trace)
            printed, size = cut("".join(traceback.format_exception(type(error), error, error.__traceback__)), request["output_bytes"])
            if size > request["output_bytes"]:
                printed += "\n[traceback truncated: %d bytes]\n" % size
            try:
                sys.stderr.write(printed)
                sys.stderr.flush()
            except OSError:
                # The capture file is at the session's file size limit (the cell's own output
                # filled it): the error field still says what was raised.
                pass
            message = traceback.format_exception_only(type(error), error)[-1].strip()
            reply.update(status="timed_out" if timed_out else "error", exit_code=124 if timed_out else 1, error=message)
        for field in ("value", "error"):
            if reply[field] is not None:
                reply[field], reply[field + "_bytes"] = cut(reply[field], request["output_bytes"])
        reply.update(captured(request["output_bytes"]))
        return reply

    def command(request):
        import subprocess, selectors, time
        limit = request["output_bytes"]
        stdin = request.get("stdin")
        try:
            child = subprocess.Popen(request["argv"], cwd=work, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as error:
            return {"status": "error", "exit_code": 127 if isinstance(error, FileNotFoundError) else 126, "error": "%s: %s" % (request["argv"][0], error.strerror), "stdout": "", "stderr": "", "stdout_bytes": 0, "stderr_bytes": 0, "value": None}
        if stdin:
            import threading
            def feed():
                try:
                    child.stdin.write(stdin.encode())
                    child.stdin.close()
                except OSError:
                    pass
            threading.Thread(target=feed, daemon=True).start()
        kept = {"stdout": bytearray(), "stderr": bytearray()}
        counted = {"stdout": 0, "stderr": 0}
        selector = selectors.DefaultSelector()
        selector.register(child.stdout, selectors.EVENT_READ, "stdout")
        selector.register(child.stderr, selectors.EVENT_READ, "stderr")
        deadline = time.monotonic() + request["timeout_ms"] / 1000
        timed_out = False
        open_streams = 2
        while open_streams:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in selector.select(left):
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                counted[key.data] += len(data)
                room = limit - len(kept[key.data])
                if room > 0:
                    kept[key.data] += data[:room]
        if timed_out:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:
                pass
        status = child.wait()
        selector.close()
        child.stdout.close()
        child.stderr.close()
        exit_code = 124 if timed_out else (status if status >= 0 else 128 - status)
        reply = {"status": "timed_out" if timed_out else ("ok" if status == 0 else "error"), "exit_code": exit_code, "error": None, "value": None}
        for name in ("stdout", "stderr"):
            reply[name] = bytes(kept[name]).decode("utf-8", "replace")
            reply[name + "_bytes"] = counted[name]
        return reply

    def inside(path):
        full = os.path.realpath(os.path.join(work, path))
        if full != work and not full.startswith(work + "/"):
            raise PermissionError("%s leaves the work dir" % path)
        return full

    def write_file(request):
        full = inside(request["path"])
        os.makedirs(os.path.dirname(full), exist_ok=True)
        data = base64.b64decode(request["data"])
        try:
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK, request.get("mode", 0o644))
        except OSError as error:
            if error.errno == errno.ENXIO:  # a FIFO nobody reads, or a socket
                return not_regular(request)
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return not_regular(request)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        return {"bytes": len(data)}

    # Only regular files are served. Opened O_NONBLOCK, and refused by what fstat says: a FIFO a
    # cell made would otherwise hold the kernel until something wrote to it.
    def not_regular(request):
        return {"error": {"code": "not_a_file", "message": "%s is not a regular file (a directory, FIFO, socket or device): only regular files are read and written" % request["path"]}}

    def read_file(request):
        full = inside(request["path"])
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return not_regular(request)
            if info.st_size > request["max_bytes"]:
                return {"error": {"code": "too_large", "message": "%s has %d bytes, over the limit of %d" % (request["path"], info.st_size, request["max_bytes"])}}
            parts = []
            while True:
                part = os.read(fd, 1 << 20)
                if not part:
                    break
                parts.append(part)
        finally:
            os.close(fd)
        return {"data": base64.b64encode(b"".join(parts)).decode()}

    operations = {"cell": cell, "command": command, "write": write_file, "read": read_file}
    send({"ready": True, "version": sys.version.split()[0]})
    while True:
        request = json.loads(read_exact(struct.unpack(">I", read_exact(4))[0]))
        try:
            reply = operations[request["op"]](request)
        except FileNotFoundError as error:
            reply = {"error": {"code": "not_found", "message": "%s does not exist" % request.get("path", error.filename)}}
        except OSError as error:
            reply = {"error": {"code": "os_error", "message": "%s: %s" % (request.get("path", ""), error.strerror or error)}}
        reply["id"] = request["id"]
        send(reply)

_kernel()
