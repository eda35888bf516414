import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { FORGE_FRAME, startGuest, stopGuests } from './guest-process.js';

/**
 * The task harnesses (src/tasks/python-harness.py, node-harness.cjs) run straight on the host,
 * as launch.ts runs them in the sandbox: `interpreter harness code-file input-file`, frames on
 * fd 3. What the host then makes of the frames (result-channel.ts) is tested with the sandbox
 * in test/integration/tasks/ and security/task-pipe.test.ts; here, the harness's side of the
 * protocol.
 */
const scratch = mkdtempSync(join(tmpdir(), 'task-harness-'));
after(() => {
  stopGuests();
  rmSync(scratch, { recursive: true, force: true });
});

type Lang = 'python' | 'node';
const HARNESS: Record<Lang, { argv: string[]; code: string }> = {
  python: { argv: ['/usr/bin/python3', fileURLToPath(new URL('../../../src/tasks/python-harness.py', import.meta.url))], code: 'task-code.py' },
  node: { argv: [process.execPath, fileURLToPath(new URL('../../../src/tasks/node-harness.cjs', import.meta.url))], code: 'task-code.js' },
};
const items = [{ json: { n: 1 } }, { json: { n: 2 } }];
let runs = 0;

async function runHarness(lang: Lang, code: string, task: Record<string, unknown> = {}) {
  runs += 1;
  const codeFile = join(scratch, `${runs}-${HARNESS[lang].code}`);
  const inputFile = join(scratch, `${runs}-input.json`);
  writeFileSync(codeFile, code);
  writeFileSync(inputFile, JSON.stringify({ mode: 'all_items', items, max_result_bytes: 1 << 20, max_print_calls: 100, max_print_bytes: 1 << 20, ...task }));
  const guest = startGuest([...HARNESS[lang].argv, codeFile, inputFile], { frameFd: 3 });
  const frames = await guest.rest();
  return { frames, exitCode: await guest.exited, stderr: guest.stderr(), codeFile };
}

const RESULT = '{"result": [], "print_args": []}';
const CODE = {
  printsAndReturns: { python: 'print("a", 1)\nreturn [{"n": 1}]', node: 'console.log("a", 1);\nreturn [{ n: 1 }];' },
  fivePrints: { python: 'for i in range(5):\n    print(i)\nreturn []', node: 'for (let i = 0; i < 5; i++) console.log(i);\nreturn [];' },
  perItem: {
    python: 'if _item["json"]["n"] == 1:\n    return None\nreturn {"m": _item["json"]["n"] * 10}',
    node: 'if (item.json.n === 1) return null;\nreturn { m: item.json.n * 10 };',
  },
  raises: { python: 'print("before")\nraise ValueError("bad value")', node: 'console.log("before");\nthrow new TypeError("bad value");' },
  exits: { python: 'import sys\nsys.exit(3)', node: 'process.exit(3);' },
  notItems: { python: 'return 5', node: 'return 5;' },
  forges: { python: FORGE_FRAME.python(3, RESULT) + '\nreturn []', node: FORGE_FRAME.node(3, RESULT) + '\nreturn [];' },
} satisfies Record<string, Record<Lang, string>>;

for (const lang of ['python', 'node'] as const) {
  const call = lang === 'python' ? 'print()' : 'console.log()';
  describe(`${lang} task harness, straight over a pipe`, () => {
    it('sends each kept print as a frame as it is made, then one message with the result and the prints, and exits 0', async () => {
      const { frames, exitCode } = await runHarness(lang, CODE.printsAndReturns[lang]);
      assert.deepEqual(frames, [{ print: ["'a'", '1'] }, { result: [{ json: { n: 1 } }], print_args: [["'a'", '1']] }]);
      assert.equal(exitCode, 0);
    });

    it('past max_print_calls, counts each dropped call in its own frame and notes them in the message', async () => {
      const { frames } = await runHarness(lang, CODE.fivePrints[lang], { max_print_calls: 2 });
      const note = `[3 more ${call} calls dropped: print_args keeps the first 2 calls, up to 1048576 bytes]`;
      assert.deepEqual(frames, [{ print: ['0'] }, { print: ['1'] }, { dropped: 1 }, { dropped: 1 }, { dropped: 1 }, { result: [], print_args: [['0'], ['1'], [note]] }]);
    });

    it('per_item: pairs each returned value with its input and skips an empty return', async () => {
      const { frames } = await runHarness(lang, CODE.perItem[lang], { mode: 'per_item' });
      assert.deepEqual(frames, [{ result: [{ json: { m: 20 }, pairedItem: { item: 1 } }], print_args: [] }]);
    });

    it("reports the code's exception with a stack that starts at the code, and the prints made before it", async () => {
      const { frames, exitCode, codeFile } = await runHarness(lang, CODE.raises[lang]);
      assert.equal(frames.length, 2);
      const { error, print_args } = frames[1] as { error: Record<string, string>; print_args: unknown };
      assert.deepEqual(print_args, [["'before'"]]);
      assert.equal(error.message, 'bad value');
      assert.equal(error.description, lang === 'python' ? 'ValueError' : 'TypeError');
      assert.equal(error.stderr, '');
      assert.ok(error.stack!.includes(codeFile), error.stack);
      if (lang === 'python') assert.doesNotMatch(error.stack!, /python-harness\.py/);
      assert.equal(exitCode, 0);
    });

    it('an exit of the code is its error, and the harness itself ends well', async () => {
      const { frames, exitCode } = await runHarness(lang, CODE.exits[lang]);
      const { error } = frames[0] as { error: Record<string, string> };
      assert.match(error.message, /^the code exited with code 3 \((SystemExit|process\.exit, or a promise that never settles)\) instead of returning its items$/);
      assert.equal(exitCode, 0);
    });

    it('a return that is not items is its error', async () => {
      const { frames } = await runHarness(lang, CODE.notItems[lang]);
      const { error } = frames[0] as { error: Record<string, string> };
      assert.match(error.message, /^the code returned (int|number): return (a list|an array) of items/);
    });

    it("a frame the code writes to fd 3 arrives as written, ahead of the harness's own: the host checks them all", async () => {
      const { frames } = await runHarness(lang, CODE.forges[lang]);
      assert.deepEqual(frames, [
        { result: [], print_args: [] },
        { result: [], print_args: [] },
      ]);
    });
  });
}
