import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { TaskErrorResponse, TaskResponse, TaskResultResponse } from '../../../src/contract/task.js';
import { runTask } from '../../../src/tasks/run-task.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Security round 2, class 8: a code task's result pipe (fd 3) is reachable by the code it runs,
 * so the host treats every byte on it as untrusted. Each attack writes to fd 3 itself
 * (`os.write(3, ...)`, `fs.writeSync(3, ...)`) and must gain nothing the harness would refuse it:
 * no print cap bypassed, no pairedItem the harness would not give, no crash hidden behind a
 * frame, no prints lost when the task is killed.
 */
const runtime = testRuntime();
after(() => runtime.dispose());

const items = [{ json: { n: 1 } }, { json: { n: 2 } }, { json: { n: 3 } }];
type Lang = 'python' | 'node';
const LANGS: readonly Lang[] = ['python', 'node'];

/** `send(message)`: one frame in the harness's own framing, written straight to fd 3. */
const SEND: Record<Lang, string> = {
  python: 'import json, os, time\ndef send(message):\n    body = json.dumps(message).encode()\n    os.write(3, len(body).to_bytes(4, "big") + body)\n',
  node:
    'const fs = require("node:fs");\n' +
    'const send = (message) => {\n  const body = Buffer.from(JSON.stringify(message));\n  const head = Buffer.alloc(4);\n  head.writeUInt32BE(body.length);\n' +
    '  fs.writeSync(3, Buffer.concat([head, body]));\n};\n',
};
/** Ends the process at once: the harness never gets to send its own frame. */
const HARD_EXIT = (lang: Lang, code = 0) => (lang === 'python' ? `os._exit(${code})` : `process.reallyExit(${code});`);
/** Keeps the task alive until its timeout. */
const HANG: Record<Lang, string> = { python: 'time.sleep(30)', node: 'for (;;) {}' };
/**
 * The timeout of a task that hangs after doing what the test is about (the host judges the pipe
 * only after the kill): room for the sandbox and interpreter to start and get that far first,
 * which a loaded CI machine needs (700 ms was tight).
 */
const HANG_TIMEOUT_MS = 3_000;
const PRINT = (lang: Lang, text: string) => (lang === 'python' ? `print(${JSON.stringify(text)})` : `console.log(${JSON.stringify(text)});`);
const PRINT_LOOP = (lang: Lang, count: number) => (lang === 'python' ? `for i in range(${count}):\n    print(i)` : `for (let i = 0; i < ${count}; i++) console.log(i);`);
const code = (lang: Lang, ...lines: string[]) => SEND[lang] + lines.join('\n');
/** A JSON literal both languages read as the same value. */
const literal = (value: unknown) => JSON.stringify(value).replaceAll('true', 'True').replaceAll('false', 'False');
const message = (lang: Lang, value: unknown) => (lang === 'python' ? literal(value) : JSON.stringify(value));

function task(lang: Lang, source: string, request: Record<string, unknown> = {}): Promise<TaskResponse> {
  return runTask({ lang, mode: 'all_items', items, code: source, ...request }, { runtime });
}

function failed(response: TaskResponse, code: TaskErrorResponse['error_code']): TaskErrorResponse {
  assert.ok('error' in response, `expected ${code}, got ${JSON.stringify(response).slice(0, 2000)}`);
  assert.equal(response.error_code, code, JSON.stringify(response.error).slice(0, 2000));
  return response;
}

function succeeded(response: TaskResponse): TaskResultResponse {
  assert.ok('result' in response, `expected a result, got ${JSON.stringify(response).slice(0, 2000)}`);
  return response;
}

const hundredAndFifty = Array.from({ length: 150 }, (_, i) => [`forged ${i}`]);

describe('code tasks: a forged frame gains nothing', () => {
  for (const lang of LANGS) {
    it(`${lang}: a frame with 150 print calls in it is a protocol error, not past the 100-call cap`, async () => {
      const forged = { result: [{ json: { forged: true } }], print_args: hundredAndFifty };
      const response = failed(await task(lang, code(lang, `send(${message(lang, forged)})`, HARD_EXIT(lang))), 'task.protocol_error');
      assert.match(response.error.message, /print_args/);
      assert.deepEqual(response.print_args, []);
    });

    it(`${lang}: a frame that lists all of 150 prints the code made is a protocol error; the host keeps 100 and says so`, async () => {
      const forged = { result: [], print_args: Array.from({ length: 150 }, (_, i) => [String(i)]) };
      const response = failed(await task(lang, code(lang, PRINT_LOOP(lang, 150), `send(${message(lang, forged)})`, HARD_EXIT(lang))), 'task.protocol_error');
      assert.equal(response.print_args.length, 101);
      assert.deepEqual(response.print_args[99], ['99']);
      const call = lang === 'python' ? 'print()' : 'console.log()';
      assert.equal(response.print_args[100]![0], `[50 more ${call} calls dropped: print_args keeps the first 100 calls, up to 1048576 bytes]`);
    });

    it(`${lang}: a frame that hides the prints the code made is a protocol error`, async () => {
      const response = failed(await task(lang, code(lang, PRINT(lang, 'seen'), `send(${message(lang, { result: [], print_args: [] })})`, HARD_EXIT(lang))), 'task.protocol_error');
      assert.deepEqual(response.print_args, [["'seen'"]]);
    });

    const pairings: Array<[string, unknown[]]> = [
      ['an index past the last input', [{ item: 0 }, { item: 3 }]],
      ['two outputs for one input', [{ item: 1 }, { item: 1 }]],
      ['outputs out of order', [{ item: 2 }, { item: 0 }]],
      ['a negative index', [{ item: -1 }]],
      ['an index that is not an integer', [{ item: 0.5 }]],
      ['no pairedItem', [undefined]],
      ['a pairedItem of another shape', [{ item: 0, extra: 1 }]],
      ['a list of pairings', [[{ item: 0 }, { item: 1 }]]],
    ];
    for (const [name, pairing] of pairings) {
      it(`${lang}: per_item, a frame with ${name} is a protocol error`, async () => {
        const result = pairing.map((pairedItem, i) => (pairedItem === undefined ? { json: { i } } : { json: { i }, pairedItem }));
        const forged = { result, print_args: [] };
        const response = failed(await task(lang, code(lang, `send(${message(lang, forged)})`, HARD_EXIT(lang)), { mode: 'per_item' }), 'task.protocol_error');
        assert.match(response.error.message, /pairedItem/);
      });
    }

    it(`${lang}: per_item, a frame pairing in order, at most one per input, is what the code could return anyway`, async () => {
      const forged = {
        result: [
          { json: { a: 1 }, pairedItem: { item: 0 } },
          { json: { c: 1 }, pairedItem: { item: 2 } },
        ],
        print_args: [],
      };
      const response = succeeded(await task(lang, code(lang, `send(${message(lang, forged)})`, HARD_EXIT(lang)), { mode: 'per_item' }));
      assert.deepEqual(response.result, forged.result);
    });

    it(`${lang}: a frame over max_result_bytes fails with the harness's own message`, async () => {
      const forged = { result: [{ json: { blob: 'x'.repeat(5000) } }], print_args: [] };
      const response = failed(await task(lang, code(lang, `send(${message(lang, forged)})`, HARD_EXIT(lang)), { limits: { max_result_bytes: 1000 } }), 'task.failed');
      assert.equal(response.error.message, `the result is ${Buffer.byteLength(JSON.stringify(forged.result))} bytes of JSON, over max_result_bytes (1000)`);
    });

    it(`${lang}: a frame sent before the code hangs is not a result: the timeout is`, async () => {
      const forged = { result: [{ json: { forged: true } }], print_args: [] };
      const response = failed(await task(lang, code(lang, `send(${message(lang, forged)})`, HANG[lang]), { timeout_ms: HANG_TIMEOUT_MS }), 'run.timed_out');
      assert.equal(response.error.message, `timed out after ${HANG_TIMEOUT_MS} ms`);
    });
  }
});

describe('code tasks: exactly one frame', () => {
  for (const lang of LANGS) {
    it(`${lang}: a second frame is a protocol error, even when a timeout follows`, async () => {
      const forged = { result: [], print_args: [] };
      const response = failed(
        await task(lang, code(lang, `send(${message(lang, forged)})`, `send(${message(lang, forged)})`, HANG[lang]), { timeout_ms: HANG_TIMEOUT_MS }),
        'task.protocol_error',
      );
      assert.equal(response.error.message, 'the task sent more than one message');
    });

    it(`${lang}: a print after the frame is a protocol error`, async () => {
      const forged = { result: [], print_args: [] };
      const response = failed(await task(lang, code(lang, `send(${message(lang, forged)})`, PRINT(lang, 'late'), HARD_EXIT(lang))), 'task.protocol_error');
      assert.match(response.error.message, /after its message/);
    });

    it(`${lang}: bytes trailing the frame are a protocol error, even when a timeout follows`, async () => {
      const forged = { result: [], print_args: [] };
      const trailing = lang === 'python' ? 'os.write(3, b"\\x00\\x00")' : 'fs.writeSync(3, Buffer.from([0, 0]));';
      const response = failed(await task(lang, code(lang, `send(${message(lang, forged)})`, trailing, HANG[lang]), { timeout_ms: HANG_TIMEOUT_MS }), 'task.protocol_error');
      assert.match(response.error.message, /after its message/);
    });
  }
});

describe('code tasks: a crash after the frame', () => {
  for (const lang of LANGS) {
    it(`${lang}: exit 3 after a valid frame is a crash that keeps the frame's print_args`, async () => {
      const forged = { result: [{ json: { forged: true } }], print_args: [["'kept'"]] };
      const response = failed(await task(lang, code(lang, PRINT(lang, 'kept'), `send(${message(lang, forged)})`, HARD_EXIT(lang, 3))), 'task.crashed');
      assert.equal(response.error.message, 'the interpreter exited with code 3 after sending its message');
      assert.deepEqual(response.print_args, [["'kept'"]]);
    });
  }

  it('python: killed by a signal after a valid frame is a crash', async () => {
    const forged = { result: [], print_args: [] };
    const response = failed(await task('python', code('python', `send(${literal(forged)})`, 'import signal\nos.kill(os.getpid(), signal.SIGKILL)')), 'task.crashed');
    assert.match(response.error.message, /^the interpreter (was killed by SIGKILL|exited with code 137) after sending its message$/);
  });

  it("node: an exit listener that exits 3 after the harness's own frame is a crash", async () => {
    const response = failed(await task('node', 'console.log("kept");\nprocess.on("exit", () => process.reallyExit(3));\nreturn [];'), 'task.crashed');
    assert.equal(response.error.message, 'the interpreter exited with code 3 after sending its message');
    assert.deepEqual(response.print_args, [["'kept'"]]);
  });
});

describe('code tasks: prints outlive a kill', () => {
  for (const lang of LANGS) {
    it(`${lang}: prints made before a timeout come back with run.timed_out`, async () => {
      const source = `${PRINT(lang, 'before the timeout')}\n${lang === 'python' ? 'import time\ntime.sleep(30)' : 'for (;;) {}'}`;
      const response = failed(await task(lang, source, { timeout_ms: HANG_TIMEOUT_MS }), 'run.timed_out');
      assert.deepEqual(response.print_args, [["'before the timeout'"]]);
    });

    it(`${lang}: 150 prints before a timeout come back capped at 100, with the note`, async () => {
      const source = `${PRINT_LOOP(lang, 150)}\n${lang === 'python' ? 'import time\ntime.sleep(30)' : 'for (;;) {}'}`;
      // 150 prints before the hang: more room than the others.
      const response = failed(await task(lang, source, { timeout_ms: 2 * HANG_TIMEOUT_MS }), 'run.timed_out');
      assert.equal(response.print_args.length, 101);
      assert.match(response.print_args[100]![0]!, /^\[50 more (print|console\.log)\(\) calls dropped: print_args keeps the first 100 calls/);
    });

    // Python runs unbuffered now; node's stdout was already synchronous (a guard there).
    it(`${lang}: output written to stdout before a timeout reaches stderr`, async () => {
      const source = lang === 'python' ? 'import sys, time\nsys.stdout.write("partial line")\ntime.sleep(30)' : 'process.stdout.write("partial line");\nfor (;;) {}';
      const response = failed(await task(lang, source, { timeout_ms: HANG_TIMEOUT_MS }), 'run.timed_out');
      assert.match(response.error.stderr, /partial line/);
    });
  }

  it('python: prints made before a cancel come back with run.canceled', async () => {
    const controller = new AbortController();
    const running = runTask({ lang: 'python', mode: 'all_items', items, code: 'import time\nprint("started")\ntime.sleep(30)' }, { runtime, signal: controller.signal });
    setTimeout(() => controller.abort(), HANG_TIMEOUT_MS);
    const response = failed(await running, 'run.canceled');
    assert.deepEqual(response.print_args, [["'started'"]]);
  });

  it('node: prints made before the memory limit kills the task come back with run.out_of_memory', async () => {
    const source = 'console.log("allocating");\nconst keep = [];\nfor (;;) keep.push(Buffer.alloc(16 * 1024 * 1024, 1));';
    const response = failed(await task('node', source, { timeout_ms: 60_000, limits: { memory_bytes: 128 * 1024 * 1024 } }), 'run.out_of_memory');
    assert.deepEqual(response.print_args, [["'allocating'"]]);
  });
});

/**
 * Guards, not attacks (they pass before the fix too): what the harness itself sends must keep
 * passing the host's checks, or an honest task would end in a protocol error.
 */
describe('code tasks: what the harness itself does still passes the host checks', () => {
  it('python: threads printing while the task returns', async () => {
    const source =
      // The threads are still printing when the task returns; it waits until they have printed
      // past the cap, so the count does not depend on how the machine schedules them.
      'import threading, time\nprinted = [0]\ndef spam():\n    while True:\n        print("x" * 5000)\n        printed[0] += 1\nfor _ in range(4):\n    threading.Thread(target=spam, daemon=True).start()\nfor i in range(50):\n    print(i)\nwhile printed[0] < 200:\n    time.sleep(0.001)\nreturn [{"done": True}]';
    const response = succeeded(await task('python', source));
    assert.equal(response.print_args.length, 101);
  });

  it('python: a forked child prints to stderr, not into print_args', async () => {
    const source = 'import os\npid = os.fork()\nif pid == 0:\n    print("from the child")\n    os._exit(0)\nos.waitpid(pid, 0)\nprint("from the task")\nreturn []';
    const response = succeeded(await task('python', source));
    assert.deepEqual(response.print_args, [["'from the task'"]]);
  });

  for (const lang of LANGS) {
    it(`${lang}: prints of every kind of text come back as the harness kept them`, async () => {
      // Control characters, a lone surrogate, astral and line-separator characters, escapes: the
      // two sides measure and encode them alike, or the message would not match.
      const texts = '["é", "\\x00\\x1f\\x7f", "\\ud800", "😀", "\\"\\\\", "\\u2028"]';
      const loop = lang === 'python' ? `for text in ${texts}:\n    print(text, text * 3)` : `for (const text of ${texts}) console.log(text, text.repeat(3));`;
      const response = succeeded(await task(lang, `${loop}\n${lang === 'python' ? 'return []' : 'return [];'}`));
      assert.equal(response.print_args.length, 6);
    });

    it(`${lang}: a million prints are counted, and cheaply`, async () => {
      const response = succeeded(await task(lang, `${PRINT_LOOP(lang, 1_000_000)}\n${lang === 'python' ? 'return []' : 'return [];'}`, { timeout_ms: 20_000 }));
      assert.equal(response.print_args.length, 101);
      assert.match(response.print_args[100]![0]!, /^\[999900 more /);
    });
  }
});

/** A guard too: the two sides measure print bytes alike, to the byte. */
describe('code tasks: the host and the harness draw the print byte cap at the same call', () => {
  const maxPrintBytes = 1000;
  const small = testRuntime({ tasks: { ...runtime.config.tasks, maxPrintBytes } });
  after(() => small.dispose());
  // Escaped control characters, astral and line-separator characters, a BOM, a lone surrogate,
  // each as the harness shows it (python's repr(), node's util.inspect()): what is measured.
  const escaped = (text: string) => JSON.stringify(text).replace(/[^\x20-\x7e]/gu, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);
  const texts: Array<{ text: string } & Record<Lang, string>> = [
    { text: 'é😀', python: "'é😀'", node: "'é😀'" },
    { text: '\x00\x1f\x7f', python: "'\\x00\\x1f\\x7f'", node: "'\\x00\\x1F\\x7F'" },
    { text: '"\\', python: `'"\\\\'`, node: `'"\\\\'` },
    { text: '\u2028\u2029', python: "'\\u2028\\u2029'", node: "'\u2028\u2029'" },
    { text: '\t\n\r\b\f\x0b', python: "'\\t\\n\\r\\x08\\x0c\\x0b'", node: "'\\t\\n\\r\\b\\f\\x0B'" },
    { text: '\ufeff', python: "'\\ufeff'", node: "'\ufeff'" },
    { text: '\ud800', python: "'\\ud800'", node: "'\\ud800'" },
  ];
  for (const lang of LANGS) {
    for (const { text, [lang]: shown } of texts) {
      for (const over of [0, 1]) {
        it(`${lang}: ${escaped(text)} ${over ? 'one byte past' : 'exactly at'} the cap`, async () => {
          const size = Buffer.byteLength(JSON.stringify([shown]));
          // The filler is shown quoted: ["'aa...a'"] is 6 bytes more than its a's.
          const filler = `"a" ${lang === 'python' ? '*' : '.repeat('} ${maxPrintBytes - size - 6 + over}${lang === 'python' ? '' : ')'}`;
          const print = lang === 'python' ? (value: string) => `print(${value})` : (value: string) => `console.log(${value});`;
          const source = [print(filler), print(JSON.stringify(text)), print('"x"'), lang === 'python' ? 'return []' : 'return [];'].join('\n');
          const response = succeeded(await runTask({ lang, mode: 'all_items', items: [], code: source }, { runtime: small }));
          const note = (count: number) => [
            `[${count} more ${lang === 'python' ? 'print()' : 'console.log()'} ${count === 1 ? 'call' : 'calls'} dropped: print_args keeps the first 100 calls, up to 1000 bytes]`,
          ];
          assert.deepEqual(response.print_args.slice(1), over ? [note(2)] : [[shown], note(1)]);
        });
      }
    }
  }
});
