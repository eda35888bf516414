import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { before, describe, it } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import { OutputLineSchema } from '../../../src/contract/code-interpreter.js';

/**
 * kernel-bridge.py's own functions, imported from its file as a module (no kernel, no sandbox):
 * the output lines it makes of what a kernel reports, which the host checks against the contract
 * (contract/code-interpreter.ts), and the code it has a kernel run to set a run's env vars. One
 * python (the sandbox's, /usr/bin/python3; -B, so that no bytecode is left in src/) evaluates
 * every case at once; the bridge over its pipes, with real kernels, is
 * test/integration/guest-code/kernel-bridge.test.ts.
 */
const BRIDGE = fileURLToPath(new URL('../../../src/interpreter/python/kernel-bridge.py', import.meta.url));

/** Each case a python expression over the module `b`; its value as JSON, or the error it raised. */
const DRIVER = `
import importlib.util, json, os, shlex, sys
spec = importlib.util.spec_from_file_location("kernel_bridge", sys.argv[1])
b = importlib.util.module_from_spec(spec)
spec.loader.exec_module(b)

def env_run(env_vars, before):
    """The kernel's environment while a run's vars are set, then once they are put back."""
    for key, value in before.items():
        os.environ[key] = value
    namespace = {}
    exec(b.env_code(env_vars), namespace)
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
  limits: '[b.MAX_STREAM_TEXT, b.MAX_RESULT_BYTES, b.RESULT_TEXT_KEPT]',
  stdout: 'b.stream_line("stdout", "hi\\n")',
  otherStream: 'b.stream_line("fd9", "x")',
  longStream: 'b.stream_line("stderr", "x" * (b.MAX_STREAM_TEXT + 5))',
  result: 'b.result_line({"text/plain": "1", "text/html": "<b>1</b>", "e2b/chart": {"type": "line"}, "application/x-own": "own"}, True)',
  oversized: 'b.result_line({"text/plain": "y" * (b.RESULT_TEXT_KEPT + 10), "image/png": "AAAA"}, False, b.MAX_RESULT_BYTES + 1)',
  smallOversized: 'b.result_line({"text/plain": "z"}, True, 10)',
  errorReport: 'b.reported_error({"name": "ValueError", "value": "bad", "traceback": "tb"})',
  stringReport: 'b.reported_error("it broke")',
  longError: 'b.error_line("E", "v" * (b.MAX_STREAM_TEXT + 1), "")',
  valueAndError: 'b.value_and_error({"result": 42, "error": {"name": "E", "value": "v"}})',
  quoted: '[shlex.split(b.shell_quote(text)) for text in ["plain", "it\'s", "a b", "\'\'", "$HOME `x` \\\\"]]',
  exits: '[b.describe_exit(0), b.describe_exit(3), b.describe_exit(-9), b.describe_exit(-15), b.describe_exit(None)]',
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
    const output = execFileSync('/usr/bin/python3', ['-I', '-B', '-c', DRIVER, BRIDGE], { input: JSON.stringify(CASES), encoding: 'utf8', maxBuffer: 64 << 20 });
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
