# E2B's output lines as the bridge of a code-interpreter context (kernel-bridge.py) makes them of
# what its kernel says: stdout, stderr, result (a result's formats under E2B's field names, cut
# past a size) and error. Runs inside a sandbox as its user, in the bridge's own process: the
# bridge is given this source on its argv (the sandbox may have no copy of our files) and loads it
# as the module bridge_lines. The lines reach the host inside the bridge's reply frames on its
# stdout, where src/interpreter/kernel-bridge.ts checks each against contract/code-interpreter.ts.
import json

# One output line holds at most this much text of a stream; a longer message is cut, said so.
MAX_STREAM_TEXT = 1024 * 1024
# A result's formats together, as JSON: past it the result keeps a cut text and loses the rest.
MAX_RESULT_BYTES = 16 * 1024 * 1024
RESULT_TEXT_KEPT = 64 * 1024

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


def stream_line(name, text):
    if len(text) > MAX_STREAM_TEXT:
        text = text[:MAX_STREAM_TEXT] + "\n[output cut: one write of %d characters, the first %d kept]\n" % (len(text), MAX_STREAM_TEXT)
    return {"type": "stderr" if name == "stderr" else "stdout", "text": text}


def result_line(data, is_main, oversized=None):
    """A result line of a result's formats; `oversized`: the size of formats the kernel left out, said in its text."""
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
    # The kernel's word on a size it left out is taken only to be larger than what came.
    size = max(oversized if isinstance(oversized, int) else 0, len(json.dumps(line)))
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


def reported_error(error):
    """The error line of a kernel's end-of-cell report, whatever shape the report took."""
    error = error if isinstance(error, dict) else {"value": str(error)}
    return [error_line(str(error.get("name", "Error")), str(error.get("value", "")), str(error.get("traceback", "")))]
