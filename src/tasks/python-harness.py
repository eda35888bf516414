# The python side of a code task, staged read-only into the sandbox by src/tasks/launch.ts and run
# as `python3 task-harness.py <code file> <input file>` with fd 3 as the result pipe:
# each kept print() call as it is made, then one message. The code can write to fd 3 too, so
# the parent checks all of it (result-channel.ts): this side only has to keep to the protocol.
import builtins
import os
import sys
from _ast import PyCF_ONLY_AST
from _thread import RLock
from time import monotonic
# The C half of the json package: importing json itself pulls in re and enum, which would
# double the interpreter's start-up time.
from _json import encode_basestring, make_encoder, make_scanner

RESULT_FD = 3
# One frame at a time, whichever thread prints: frames never interleave. Reentrant: a __repr__
# or __str__ of the code's may print while a frame is being made.
PIPE_LOCK = RLock()
# Dropped print() calls are counted to the parent one by one up to this many, so a kill loses
# none of them; past it, a loop of prints would spend its time on the pipe: they are counted at
# most every DROPPED_EVERY_SECONDS (and before the message).
EXACT_DROPS = 1000
DROPPED_EVERY_SECONDS = 0.05


class JsonContext:
    """What make_scanner reads from a json.JSONDecoder: plain JSON, no hooks."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = None


def to_json(value):
    # default=str: values JSON cannot carry (datetime, set, ...) travel as their str().
    encode = make_encoder({}, str, encode_basestring, None, ':', ',', False, False, False)
    # A lone surrogate cannot be UTF-8: it becomes '?' rather than breaking the message.
    return ''.join(encode(value, 0)).encode('utf-8', 'replace')


def write_frame(payload):
    frame = memoryview(len(payload).to_bytes(4, 'big') + payload)
    while frame:
        frame = frame[os.write(RESULT_FD, frame):]


class ResultError(Exception):
    """The code returned something that is not items, or too much of it."""


class Prints:
    """
    print() calls as lists of formatted arguments: the first max_calls, up to max_bytes of JSON.
    Each kept call goes to the parent as it is made ({"print": [...]}) and dropped ones are
    counted there ({"dropped": n}), so a kill loses none; the parent keeps its own list by the
    same rule, and the message's print_args must equal it.
    """

    def __init__(self, max_calls, max_bytes):
        self.max_calls = max_calls
        self.max_bytes = max_bytes
        self.kept = []
        self.kept_bytes = 0
        self.dropped = 0
        self.unsent_drops = 0
        self.drops_sent_at = 0.0

    def record(self, args):
        encoded = None
        if not self.dropped:  # once calls are dropped, every later one is: no need to format it
            # repr, strings too: the protocol shows print("Hello", 123) as ["'Hello'", "123"].
            formatted = [repr(arg) for arg in args]
            encoded = to_json(formatted)
        with PIPE_LOCK:
            if encoded is not None and not self.dropped and len(self.kept) < self.max_calls and self.kept_bytes + len(encoded) <= self.max_bytes:
                self.kept.append(formatted)
                self.kept_bytes += len(encoded)
                write_frame(b'{"print":' + encoded + b'}')
                return
            self.dropped += 1
            self.unsent_drops += 1
            if self.dropped <= EXACT_DROPS or monotonic() - self.drops_sent_at >= DROPPED_EVERY_SECONDS:
                self.send_drops()

    def send_drops(self):
        with PIPE_LOCK:
            if self.unsent_drops:
                write_frame(b'{"dropped":%d}' % self.unsent_drops)
                self.unsent_drops = 0
                self.drops_sent_at = monotonic()

    def as_list(self):
        if not self.dropped:
            return self.kept
        calls = 'call' if self.dropped == 1 else 'calls'
        note = f'[{self.dropped} more print() {calls} dropped: print_args keeps the first {self.max_calls} calls, up to {self.max_bytes} bytes]'
        return self.kept + [[note]]


def capture_prints(prints):
    """
    print() aimed at stdout is recorded; print(file=...) elsewhere writes as usual, and so does
    every print() of a forked child (multiprocessing): its calls are not the task's own.
    """
    stdout = sys.stdout
    real_print = builtins.print
    forked = []
    os.register_at_fork(after_in_child=lambda: forked.append(True))

    def captured_print(*args, sep=' ', end='\n', file=None, flush=False):
        if (sys.stdout if file is None else file) is stdout and not forked:
            prints.record(args)
        else:
            real_print(*args, sep=sep, end=end, file=file, flush=flush)

    builtins.print = captured_print


def compile_task(code_path, parameter):
    """The code is a function body: its statements become the body of a function, line numbers intact."""
    with open(code_path, encoding='utf-8') as file:
        body = compile(file.read(), code_path, 'exec', PyCF_ONLY_AST).body
    module = compile(f'def task({parameter}):\n    pass\n', code_path, 'exec', PyCF_ONLY_AST)
    if body:
        module.body[0].body = body
    namespace = {'__name__': '__task__', '__builtins__': builtins}
    exec(compile(module, code_path, 'exec'), namespace)
    return namespace['task']


def type_name(value):
    return type(value).__name__


def as_item(value, where):
    if not isinstance(value, dict):
        raise ResultError(f'{where} is {type_name(value)}, not a dict')
    if 'json' not in value:
        return {'json': value}
    if not isinstance(value['json'], dict):
        raise ResultError(f'{where}["json"] is {type_name(value["json"])}, not a dict')
    return value


def run(task, code_path):
    items = task['items']
    if task['mode'] == 'per_item':
        function = compile_task(code_path, '_item')
        result = []
        for index, item in enumerate(items):
            value = function(item)
            if value is not None:
                result.append({**as_item(value, f'the value returned for item {index}'), 'pairedItem': {'item': index}})
        return result
    value = compile_task(code_path, '_items')(items)
    values = [value] if isinstance(value, dict) else value
    if not isinstance(values, (list, tuple)):
        raise ResultError(f'the code returned {type_name(value)}: return a list of items (or one dict)')
    return [as_item(entry, f'result[{index}]') for index, entry in enumerate(values)]


def result_message(result, prints, max_result_bytes):
    try:
        encoded = to_json(result)
    except (ValueError, TypeError, RecursionError) as error:
        raise ResultError(f'the result cannot be converted to JSON: {error}') from error
    if len(encoded) > max_result_bytes:
        raise ResultError(f'the result is {len(encoded)} bytes of JSON, over max_result_bytes ({max_result_bytes})')
    return b'{"result":' + encoded + b',"print_args":' + to_json(prints.as_list()) + b'}'


def stack_of(error):
    import traceback  # only failures pay for it (it imports re)

    frames = error.__traceback__
    while frames is not None and frames.tb_frame.f_code.co_filename == __file__:
        frames = frames.tb_next
    return ''.join(traceback.format_exception(type(error), error, frames))


def error_message(error, prints):
    if isinstance(error, SystemExit):
        status = 0 if error.code is None else error.code if isinstance(error.code, int) else 1
        message = f'the code exited with code {status} (SystemExit) instead of returning its items'
    else:
        message = str(error) or type_name(error)
    info = {'message': message, 'description': type_name(error), 'stack': stack_of(error), 'stderr': ''}
    return to_json({'error': info, 'print_args': prints.as_list()})


def send(payload, prints):
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # the code closed it: what it held is lost either way
    prints.send_drops()
    write_frame(payload)
    # Threads or atexit handlers the code left behind must not hold the task open, nor write
    # after the message.
    os._exit(0)


def main():
    code_path, input_path = sys.argv[1:3]
    # Programs the code starts (os.system, exec) must not inherit the result pipe.
    os.set_inheritable(RESULT_FD, False)
    with open(input_path, encoding='utf-8') as file:
        task = make_scanner(JsonContext)(file.read(), 0)[0]
    prints = Prints(task['max_print_calls'], task['max_print_bytes'])
    capture_prints(prints)
    result = failure = None
    try:
        result = run(task, code_path)
    except BaseException as error:
        failure = error
    # Held until the process ends: print() calls of other threads wait, so the message's
    # print_args are every call the parent was sent, and nothing follows the message.
    PIPE_LOCK.acquire()
    try:
        payload = error_message(failure, prints) if failure is not None else result_message(result, prints, task['max_result_bytes'])
    except BaseException as error:
        payload = error_message(error, prints)
    send(payload, prints)


main()
