import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { TaskErrorResponse, TaskResponse, TaskResultResponse } from '../../../src/contract/task.js';
import { runTask } from '../../../src/tasks/run-task.js';
import { testRuntime } from '../../helpers/runtime.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from '../../helpers/timeouts.js';

const runtime = testRuntime();
after(() => runtime.dispose());

const items = [{ json: { n: 1 } }, { json: { n: 2 } }, { json: { n: 3 } }];

function succeeded(response: TaskResponse): TaskResultResponse {
  assert.ok('result' in response, `expected a result, got ${JSON.stringify(response)}`);
  return response;
}

function failed(response: TaskResponse): TaskErrorResponse {
  assert.ok('error' in response, `expected an error, got ${JSON.stringify(response).slice(0, 2000)}`);
  return response;
}

/** The same task, written once per language. */
type Both = Record<'python' | 'node', string>;

function eachLanguage(title: string, code: Both, check: (response: TaskResponse, lang: keyof Both) => void, request: Record<string, unknown> = {}): void {
  for (const lang of ['python', 'node'] as const) {
    it(`${lang}: ${title}`, async () => {
      check(await runTask({ lang, mode: 'all_items', items, code: code[lang], ...request }, { runtime }), lang);
    });
  }
}

/** A well-formed frame, as the harness itself would write it. */
const FORGED_FRAME: Both = {
  python: 'forged = json.dumps({"result": [{"json": {"forged": True}}], "print_args": []}).encode()\nframe = len(forged).to_bytes(4, "big") + forged\n',
  node: 'const forged = Buffer.from(JSON.stringify({ result: [{ json: { forged: true } }], print_args: [] }));\nconst frame = Buffer.concat([Buffer.alloc(4), forged]);\nframe.writeUInt32BE(forged.length, 0);\n',
};

describe('code tasks: modes', () => {
  eachLanguage(
    'all_items sees every item and returns a list; bare objects are wrapped as {json}',
    {
      python: 'return [{"total": sum(item["json"]["n"] for item in _items)}, {"json": {"kept": True}, "binary": {}}]',
      node: 'return [{ total: items.reduce((sum, item) => sum + item.json.n, 0) }, { json: { kept: true }, binary: {} }];',
    },
    (response) => assert.deepEqual(succeeded(response).result, [{ json: { total: 6 } }, { json: { kept: true }, binary: {} }]),
  );

  eachLanguage(
    'per_item runs once per item, pairs each output with its input, and drops None/undefined',
    {
      python: 'if _item["json"]["n"] == 2:\n    return None\nreturn {"double": _item["json"]["n"] * 2}',
      node: 'if (item.json.n === 2) return undefined;\nreturn { double: item.json.n * 2 };',
    },
    (response) =>
      assert.deepEqual(succeeded(response).result, [
        { json: { double: 2 }, pairedItem: { item: 0 } },
        { json: { double: 6 }, pairedItem: { item: 2 } },
      ]),
    { mode: 'per_item' },
  );

  eachLanguage(
    'per_item gives each output its own pairedItem even when the code returns one shared object',
    {
      python: 'return SHARED if "SHARED" in globals() else globals().setdefault("SHARED", {"json": {"same": True}})',
      node: 'globalThis.shared ??= { json: { same: true } };\nreturn globalThis.shared;',
    },
    (response) =>
      assert.deepEqual(
        succeeded(response).result.map((item) => item.pairedItem),
        [{ item: 0 }, { item: 1 }, { item: 2 }],
      ),
    { mode: 'per_item' },
  );

  eachLanguage(
    'await and modules work inside the function body',
    {
      python: 'import math\nreturn [{"root": math.isqrt(16)}]',
      node: 'const os = require("node:os");\nconst { sep } = await import("node:path");\nreturn [{ host: os.hostname(), sep }];',
    },
    (response) => assert.ok(succeeded(response).result.length === 1),
  );

  eachLanguage('a return value that is not items is an error naming what came back', { python: 'return 5', node: 'return 5;' }, (response) => {
    const { error_code, error } = failed(response);
    assert.equal(error_code, 'task.failed');
    assert.match(error.message, /the code returned (int|number): return (a list|an array) of items/);
  });

  it('python: multi-line strings keep their content (the body is not re-indented)', async () => {
    const code = 'text = """a\nb"""\nreturn [{"text": text}]';
    const response = succeeded(await runTask({ lang: 'python', mode: 'all_items', items: [], code }, { runtime }));
    assert.deepEqual(response.result, [{ json: { text: 'a\nb' } }]);
  });
});

describe('code tasks: print_args', () => {
  // The protocol's own examples: print("Hello", 123) and print({"key": "value"}).
  const shown = {
    python: [["'Hello'", '123'], ["{'key': 'value'}"], ['"it\'s"', "'a\\nb'", 'None'], []],
    node: [["'Hello'", '123'], ["{ key: 'value' }"], ['"it\'s"', "'a\\nb'", 'null'], []],
  };
  eachLanguage(
    'captures each call, every argument as its repr (python) or util.inspect (node), strings quoted too',
    {
      python: 'print("Hello", 123)\nprint({"key": "value"})\nprint("it\'s", "a\\nb", None)\nprint()\nreturn []',
      node: 'console.log("Hello", 123);\nconsole.log({ key: "value" });\nconsole.log("it\'s", "a\\nb", null);\nconsole.log();\nreturn [];',
    },
    (response, lang) => assert.deepEqual(succeeded(response).print_args, shown[lang]),
  );

  eachLanguage(
    'keeps the first 100 calls of 101 and says how many were dropped',
    { python: 'for i in range(101):\n    print(i)\nreturn []', node: 'for (let i = 0; i < 101; i++) console.log(i);\nreturn [];' },
    (response) => {
      const { print_args } = succeeded(response);
      assert.equal(print_args.length, 101);
      assert.deepEqual(
        print_args.slice(0, 100),
        Array.from({ length: 100 }, (_, i) => [String(i)]),
      );
      assert.match(print_args[100]![0]!, /^\[1 more (print|console\.log)\(\) call dropped: print_args keeps the first 100 calls/);
    },
  );

  eachLanguage(
    'come back with an error too',
    { python: 'print("before")\nraise ValueError("after printing")', node: 'console.log("before");\nthrow new Error("after printing");' },
    (response) => assert.deepEqual(failed(response).print_args, [["'before'"]]),
  );
});

describe('code tasks: values JSON cannot carry', () => {
  it('python: datetime and set become their str()', async () => {
    const code = 'import datetime\nreturn [{"when": datetime.datetime(2024, 5, 17, 8, 30), "tags": {"a"}}]';
    const response = succeeded(await runTask({ lang: 'python', mode: 'all_items', items: [], code }, { runtime }));
    assert.deepEqual(response.result, [{ json: { when: '2024-05-17 08:30:00', tags: "{'a'}" } }]);
  });

  it('node: BigInt becomes its digits, Map and Set their util.inspect text', async () => {
    const code = 'return [{ big: 2n ** 70n, map: new Map([["k", 1]]), set: new Set([1]) }];';
    const response = succeeded(await runTask({ lang: 'node', mode: 'all_items', items: [], code }, { runtime }));
    assert.deepEqual(response.result, [{ json: { big: '1180591620717411303424', map: "Map(1) { 'k' => 1 }", set: 'Set(1) { 1 }' } }]);
  });

  eachLanguage('a circular result is an error, not a hang', { python: 'a = {}\na["self"] = a\nreturn [a]', node: 'const a = {};\na.self = a;\nreturn [a];' }, (response) =>
    assert.match(failed(response).error.message, /the result cannot be converted to JSON: .*[Cc]ircular/),
  );
});

describe('code tasks: errors', () => {
  eachLanguage('SystemExit(3) / process.exit(3) is an error naming the exit code', { python: 'raise SystemExit(3)', node: 'process.exit(3);' }, (response) => {
    const { error_code, error } = failed(response);
    assert.equal(error_code, 'task.failed');
    assert.match(error.message, /exited with code 3 \((SystemExit|process\.exit)/);
    assert.match(error.description, /^(SystemExit|process\.exit)$/);
  });

  eachLanguage(
    'an uncaught exception comes back with its message, class and a stack pointing into the code',
    { python: 'def inner():\n    raise KeyError("missing")\n\ninner()', node: 'function inner() {\n  throw new RangeError("missing");\n}\ninner();' },
    (response) => {
      const { error_code, error } = failed(response);
      assert.equal(error_code, 'task.failed');
      assert.match(error.message, /missing/);
      assert.match(error.description, /^(KeyError|RangeError)$/);
      assert.match(error.stack, /task-code\.(py", line 2, in inner|js:2:9)/);
      assert.doesNotMatch(error.stack, /task-harness\.py/, 'python stacks start at the code');
    },
  );

  it('node: an exception thrown later, from a timer, is still reported', async () => {
    const code = 'setTimeout(() => { throw new Error("from a timer"); }, 0);\nreturn new Promise(() => {});';
    const response = failed(await runTask({ lang: 'node', mode: 'all_items', items, code }, { runtime }));
    assert.equal(response.error.message, 'from a timer');
  });

  it('node: a promise that never settles is reported, not waited on until the timeout', async () => {
    const response = failed(await runTask({ lang: 'node', mode: 'all_items', items, code: 'return new Promise(() => {});' }, { runtime }));
    assert.match(response.error.message, /exited with code 0 \(process\.exit, or a promise that never settles\)/);
  });

  eachLanguage('a syntax error names the line', { python: 'x = (1,\nreturn x', node: 'const x = ;\nreturn x;' }, (response) => {
    const { error } = failed(response);
    assert.equal(error.description, 'SyntaxError');
    assert.match(error.stack, /task-code\.(py", line \d|js:1)/);
  });

  eachLanguage(
    'stderr (and stdout, which is pointed there) comes back with an error',
    {
      python: 'import sys\nsys.stderr.write("to stderr\\n")\nsys.stdout.write("to stdout\\n")\nraise ValueError("x")',
      node: 'process.stderr.write("to stderr\\n");\nprocess.stdout.write("to stdout\\n");\nthrow new Error("x");',
    },
    (response) => {
      const { error } = failed(response);
      assert.match(error.stderr, /to stderr/);
      assert.match(error.stderr, /to stdout/);
    },
  );
});

describe('code tasks: the result pipe', () => {
  eachLanguage(
    'a length-prefixed message written to stdout is not taken as the result',
    {
      python: `import json, os, sys\n${FORGED_FRAME.python}sys.stdout.buffer.write(frame)\nsys.stdout.flush()\nos.write(1, frame)\nreturn [{"real": True}]`,
      node: `${FORGED_FRAME.node}process.stdout.write(frame);\nrequire("node:fs").writeSync(1, frame);\nreturn [{ real: true }];`,
    },
    (response) => assert.deepEqual(succeeded(response).result, [{ json: { real: true } }]),
  );

  eachLanguage(
    'a forged message on stdout followed by a hard exit is still no result',
    {
      python: `import json, os\n${FORGED_FRAME.python}os.write(1, frame)\nos._exit(0)`,
      node: `${FORGED_FRAME.node}require("node:fs").writeSync(1, frame);\nprocess.reallyExit(0);`,
    },
    (response) => {
      const { error_code, error } = failed(response);
      assert.equal(error_code, 'task.crashed');
      assert.match(error.message, /exited with code 0 before sending a result/);
      assert.match(error.stderr, /forged/, 'the forged bytes went to stderr');
    },
  );

  eachLanguage(
    'a second message on the result pipe is a protocol error, reported as an error',
    { python: `import json, os\n${FORGED_FRAME.python}os.write(3, frame)\nreturn []`, node: `${FORGED_FRAME.node}require("node:fs").writeSync(3, frame);\nreturn [];` },
    (response) => {
      const { error_code, error } = failed(response);
      assert.equal(error_code, 'task.protocol_error');
      assert.equal(error.message, 'the task sent more than one message');
    },
  );

  eachLanguage(
    'garbage on the result pipe is a protocol error naming what is wrong',
    {
      python: 'import os\nos.write(3, b"\\x00\\x00\\x00\\x05hello")\nos._exit(0)',
      node: 'require("node:fs").writeSync(3, Buffer.from([0, 0, 0, 5, 104, 101, 108, 108, 111]));\nprocess.reallyExit(0);',
    },
    (response) => {
      const { error_code, error } = failed(response);
      assert.equal(error_code, 'task.protocol_error');
      assert.match(error.message, /not valid JSON/);
    },
  );

  eachLanguage(
    'a message of the wrong shape is a protocol error naming the field',
    {
      python: 'import os\nbody = b\'{"result": [{"json": 5}], "print_args": []}\'\nos.write(3, len(body).to_bytes(4, "big") + body)\nos._exit(0)',
      node: 'const body = Buffer.from(\'{"result": [{"json": 5}], "print_args": []}\');\nconst head = Buffer.alloc(4);\nhead.writeUInt32BE(body.length);\nrequire("node:fs").writeSync(3, Buffer.concat([head, body]));\nprocess.reallyExit(0);',
    },
    (response) => {
      const { error_code, error } = failed(response);
      assert.equal(error_code, 'task.protocol_error');
      assert.match(error.message, /malformed: result\.0\.json must be an object/);
    },
  );
});

describe('code tasks: limits', () => {
  // Building, framing and checking 20 MiB is not the subject of the timeout (10 s unless given); a loaded CI machine needs room.
  const roomy = { timeout_ms: NOT_THE_SUBJECT_TIMEOUT_S * 1000 };
  eachLanguage(
    'a 20 MiB result is over the 16 MiB default: an error that says so',
    { python: 'return [{"blob": "x" * (20 * 1024 * 1024)}]', node: 'return [{ blob: "x".repeat(20 * 1024 * 1024) }];' },
    (response) => {
      const { error_code, error } = failed(response);
      assert.equal(error_code, 'task.failed');
      assert.match(error.message, /^the result is 2097\d{4} bytes of JSON, over max_result_bytes \(16777216\)$/);
    },
    roomy,
  );

  eachLanguage(
    'max_result_bytes can be raised, and a 20 MiB result then comes back whole',
    { python: 'return [{"blob": "y" * (20 * 1024 * 1024)}]', node: 'return [{ blob: "y".repeat(20 * 1024 * 1024) }];' },
    (response) => assert.equal((succeeded(response).result[0]!.json.blob as string).length, 20 * 1024 * 1024),
    { items: [], limits: { max_result_bytes: 32 * 1024 * 1024 }, ...roomy },
  );

  it('node: a child killed by the memory limit is reported against the limit', async () => {
    const code = 'const keep = [];\nfor (;;) keep.push(Buffer.alloc(16 * 1024 * 1024, 1));';
    const response = failed(await runTask({ lang: 'node', mode: 'all_items', items, code, timeout_ms: 60_000, limits: { memory_bytes: 128 * 1024 * 1024 } }, { runtime }));
    assert.equal(response.error_code, 'run.out_of_memory');
    assert.equal(response.error.message, 'killed after exceeding the memory limit of 128 MiB');
  });

  it('python: an allocation over the memory limit fails inside the code as MemoryError', async () => {
    const code = 'blob = bytearray(1024 * 1024 * 1024)\nreturn []';
    const response = failed(await runTask({ lang: 'python', mode: 'all_items', items, code, limits: { memory_bytes: 128 * 1024 * 1024 } }, { runtime }));
    assert.equal(response.error_code, 'task.failed');
    assert.equal(response.error.description, 'MemoryError');
  });

  eachLanguage(
    'a task past its timeout is killed: "timed out after N ms"',
    { python: 'import time\ntime.sleep(30)', node: 'for (;;) {}' },
    (response) => {
      const { error_code, error } = failed(response);
      assert.equal(error_code, 'run.timed_out');
      assert.equal(error.message, 'timed out after 700 ms');
    },
    { timeout_ms: 700 },
  );

  it('aborting the signal cancels the task', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const response = failed(await runTask({ lang: 'python', mode: 'all_items', items, code: 'import time\ntime.sleep(30)' }, { runtime, signal: controller.signal }));
    assert.equal(response.error_code, 'run.canceled');
  });
});
