import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { before, describe, it } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import { OutputLineSchema } from '../../../src/contract/code-interpreter.js';

/**
 * kernel-bridge.py's own functions, imported from the files of its parts as modules (no kernel, no
 * sandbox): the output lines bridge-lines.py makes of what a kernel reports, which the host checks
 * against the contract (contract/code-interpreter.ts), and what bridge-kernels.py adds: the code it
 * has a kernel run to set a run's env vars, how it names a kernel's end; and kernel-bridge.py
 * itself, how it loads its parts and its request side. One python (the sandbox's,
 * /usr/bin/python3; -B, so that no bytecode is left in src/) evaluates every case at once; the
 * bridge over its pipes, with real kernels, is test/integration/guest-code/kernel-bridge.test.ts.
 */
const part = (name: string) => fileURLToPath(new URL(`../../../src/interpreter/python/${name}`, import.meta.url));
/** The files LOAD_PARTS loads, as its argv. */
const PART_FILES = [part('bridge-lines.py'), part('bridge-kernels.py'), part('kernel-bridge.py')];

/** Python that loads the parts from PART_FILES as the modules `lines` and `kernels` under the names the bridge gives them (which the parts import each other by), then the bridge as `bridge`. */
const LOAD_PARTS = `
import importlib.util, sys

def part(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

lines = part("bridge_lines", sys.argv[1])
kernels = part("bridge_kernels", sys.argv[2])
bridge = part("kernel_bridge", sys.argv[3])
`;

/** Each case a python expression over the modules `lines` and `kernels`; its value as JSON, or the error it raised. */
const DRIVER = `${LOAD_PARTS}
import json, os, shlex

def env_run(env_vars, before):
    """The kernel's environment while a run's vars are set, then once they are put back."""
    for key, value in before.items():
        os.environ[key] = value
    namespace = {}
    exec(kernels.env_code(env_vars), namespace)
    during = {key: os.environ.get(key) for key in list(env_vars) + list(before)}
    namespace["__agent_runner_restore_env"]()
    after = {key: os.environ.get(key) for key in list(env_vars) + list(before)}
    return {"during": during, "after": after}

results = {}
for name, expression in json.load(sys.stdin).items():
    try:
        results[name] = {"value": eval(expression)}
    except Exception as error:
        results[name] = {"error": repr(error)}
print(json.dumps(results))
`;

const CASES = {
  limits: '[lines.MAX_STREAM_TEXT, lines.MAX_RESULT_BYTES, lines.RESULT_TEXT_KEPT]',
  stdout: 'lines.stream_line("stdout", "hi\\n")',
  otherStream: 'lines.stream_line("fd9", "x")',
  longStream: 'lines.stream_line("stderr", "x" * (lines.MAX_STREAM_TEXT + 5))',
  result: 'lines.result_line({"text/plain": "1", "text/html": "<b>1</b>", "e2b/chart": {"type": "line"}, "application/x-own": "own"}, True)',
  oversized: 'lines.result_line({"text/plain": "y" * (lines.RESULT_TEXT_KEPT + 10), "image/png": "AAAA"}, False, lines.MAX_RESULT_BYTES + 1)',
  smallOversized: 'lines.result_line({"text/plain": "z"}, True, 10)',
  errorReport: 'lines.reported_error({"name": "ValueError", "value": "bad", "traceback": "tb"})',
  stringReport: 'lines.reported_error("it broke")',
  longError: 'lines.error_line("E", "v" * (lines.MAX_STREAM_TEXT + 1), "")',
  valueAndError: 'kernels.value_and_error({"result": 42, "error": {"name": "E", "value": "v"}})',
  quoted: '[shlex.split(kernels.shell_quote(text)) for text in ["plain", "it\'s", "a b", "\'\'", "$HOME `x` \\\\"]]',
  exits: '[kernels.describe_exit(0), kernels.describe_exit(3), kernels.describe_exit(-9), kernels.describe_exit(-15), kernels.describe_exit(None)]',
  env: 'env_run({"AR_NEW": "a \\"quoted\\" \\\\ value\\nwith a line", "AR_OLD": "changed", "AR_UNI": "\\u00e9\\u2603"}, {"AR_OLD": "was", "AR_KEPT": "kept"})',
};

type Results = Record<keyof typeof CASES, { value?: unknown; error?: string }>;

describe("kernel-bridge.py's output lines and env code", () => {
  let results: Results;
  let MAX_STREAM_TEXT = 0;
  let MAX_RESULT_BYTES = 0;
  let RESULT_TEXT_KEPT = 0;
  const value = (name: keyof typeof CASES): unknown => {
    const result = results[name];
    assert.equal(result.error, undefined, `${CASES[name]}: ${result.error}`);
    return result.value;
  };
  /** A line as the host takes it: the contract's OutputLine. */
  const checked = (made: unknown): Record<string, unknown> => {
    assert.ok(Value.Check(OutputLineSchema, made), `${JSON.stringify(made).slice(0, 300)} is no OutputLine`);
    return made as Record<string, unknown>;
  };
  const line = (name: keyof typeof CASES) => checked(value(name));
  /** The lines a case made, each an OutputLine. */
  const lines = (name: keyof typeof CASES) => (value(name) as unknown[]).map(checked);

  before(() => {
    const output = execFileSync('/usr/bin/python3', ['-I', '-B', '-c', DRIVER, ...PART_FILES], {
      input: JSON.stringify(CASES),
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    results = JSON.parse(output) as Results;
    [MAX_STREAM_TEXT, MAX_RESULT_BYTES, RESULT_TEXT_KEPT] = value('limits') as number[];
  });

  it('a stream line is stdout unless stderr; one write over the limit is cut, and says so', () => {
    assert.deepEqual(line('stdout'), { type: 'stdout', text: 'hi\n' });
    assert.deepEqual(line('otherStream'), { type: 'stdout', text: 'x' });
    const long = line('longStream');
    assert.equal(long.type, 'stderr');
    assert.ok(String(long.text).startsWith('x'.repeat(MAX_STREAM_TEXT) + '\n[output cut: one write of ' + String(MAX_STREAM_TEXT + 5)));
  });

  it("a result's formats become E2B's fields, what has none its extra", () => {
    assert.deepEqual(line('result'), { type: 'result', is_main_result: true, text: '1', html: '<b>1</b>', chart: { type: 'line' }, extra: { 'application/x-own': 'own' } });
  });

  it('a result over the limit (by its own size or the kernel’s word) keeps only the start of its text', () => {
    const cut = line('oversized');
    assert.deepEqual(Object.keys(cut).sort(), ['is_main_result', 'text', 'type']);
    assert.ok(String(cut.text).startsWith('y'.repeat(RESULT_TEXT_KEPT) + `\n[result cut: its formats were ${MAX_RESULT_BYTES + 1} bytes`));
    // A kernel's word of a size smaller than what came is not taken.
    assert.deepEqual(line('smallOversized'), { type: 'result', is_main_result: true, text: 'z' });
  });

  it('an error report becomes one error line, whatever its shape; its text is cut past the limit', () => {
    assert.deepEqual(lines('errorReport'), [{ type: 'error', name: 'ValueError', value: 'bad', traceback: 'tb' }]);
    assert.deepEqual(lines('stringReport'), [{ type: 'error', name: 'Error', value: 'it broke', traceback: '' }]);
    assert.ok(String(line('longError').value).endsWith(`\n[error cut: ${MAX_STREAM_TEXT + 1} characters, the first ${MAX_STREAM_TEXT} kept]`));
    assert.deepEqual(lines('valueAndError'), [
      { type: 'result', is_main_result: true, text: '42' },
      { type: 'error', name: 'E', value: 'v', traceback: '' },
    ]);
  });

  it('shell_quote gives bash back the text itself, quotes and all', () => {
    assert.deepEqual(value('quoted'), [['plain'], ["it's"], ['a b'], ["''"], ['$HOME `x` \\']]);
  });

  it("describe_exit names a kill's signal, and the OOM killer's likely hand in a SIGKILL", () => {
    assert.deepEqual(value('exits'), ['exit status 0', 'exit status 3', 'killed by signal 9, out of memory?', 'killed by signal 15', 'exit status None']);
  });

  it("env_code sets a run's vars byte for byte, and its restore puts back what was (or removes what was not)", () => {
    assert.deepEqual(value('env'), {
      during: { AR_NEW: 'a "quoted" \\ value\nwith a line', AR_OLD: 'changed', AR_UNI: 'é☃', AR_KEPT: 'kept' },
      after: { AR_NEW: null, AR_OLD: 'was', AR_UNI: null, AR_KEPT: 'kept' },
    });
  });
});

describe('kernel-bridge.py and its parts', () => {
  it("loads each part from argv as the module its file names, so that a part's traceback names the part's file", () => {
    const source = (name: string) => readFileSync(part(name), 'utf8');
    const broken = `${source('bridge-kernels.py')}\nraise RuntimeError("a broken part")\n`;
    const run = spawnSync('/usr/bin/python3', ['-I', '-B', '-c', source('kernel-bridge.py'), source('bridge-lines.py'), broken, 'bash'], { encoding: 'utf8' });
    assert.equal(run.status, 1);
    const line = broken.split('\n').length - 1;
    assert.match(run.stderr, new RegExp(`File "bridge-kernels\\.py", line ${line}, in <module>\\nRuntimeError: a broken part\\n$`));
  });

  it('imported with its parts in sys.modules, it reads request frames and enters the work dir on its own', () => {
    const driver = `${LOAD_PARTS}
import io, json, queue, struct
# Two frames, then the length of one too long to read.
frames = [json.dumps({"id": 1, "op": "restart"}).encode(), b"{not json"]
sys.stdin = io.TextIOWrapper(io.BytesIO(b"".join(struct.pack(">I", len(f)) + f for f in frames) + struct.pack(">I", bridge.MAX_REQUEST + 1)))
requests = queue.Queue()
bridge.read_requests(requests)
taken = [requests.get_nowait() for _ in range(requests.qsize())]
print(json.dumps({"requests": taken, "missing": bridge.enter_work_dir("/nonexistent/dir"), "none": bridge.enter_work_dir(None)}))
`;
    const output = execFileSync('/usr/bin/python3', ['-I', '-B', '-c', driver, ...PART_FILES], { encoding: 'utf8' });
    const { requests, missing, none } = JSON.parse(output) as { requests: Array<Record<string, unknown> | null>; missing: string; none: null };
    assert.equal(requests.length, 4);
    assert.deepEqual(requests[0], { id: 1, op: 'restart' });
    assert.match(String(requests[1]?.invalid), /^Expecting property name/);
    assert.match(String(requests[2]?.invalid), /^a request of \d+ bytes$/);
    assert.equal(requests[3], null);
    assert.match(missing, /^the context's directory \/nonexistent\/dir could not be entered \(No such file or directory\); it works in \//);
    assert.equal(none, null);
  });
});
