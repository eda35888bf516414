import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import { setTimeout as sleep } from 'node:timers/promises';
import { KernelFileReplySchema, KernelReadySchema, KernelRunReplySchema } from '../../../src/contract/session-kernel.js';
import type { LanguageDefinition } from '../../../src/languages/language.js';
import { node } from '../../../src/languages/node.js';
import { python } from '../../../src/languages/python.js';
import type { Toolchain } from '../../../src/languages/toolchain.js';
import { encodeFrame } from '../../../src/wire/frame-codec.js';
import { FORGE_FRAME, startGuest, stopGuests, type GuestProcess } from './guest-process.js';

/**
 * The session kernels (src/languages/session-python.py, session-node.cjs) run without a
 * sandbox, by the command line their language gives (`python3 -c KERNEL WORK`, `node -e KERNEL
 * WORK`), with the descriptors session/kernel-launcher.ts arranges: requests on fd 3, replies
 * on fd 4, fds 1 and 2 appended to /tmp/.session/stdout and stderr. That path is fixed, so each
 * kernel gets a /tmp of its own: a user and mount namespace (unshare) with a tmpfs on /tmp,
 * nothing else of a sandbox. Through the sandbox and the host's channel, the same kernels are
 * tested in test/integration/http/sessions.test.ts and security/session-exec-policy.test.ts.
 */
after(stopGuests);

const WORK = '/tmp/work';
const OWN_TMP = [
  'unshare',
  '--user',
  '--map-root-user',
  '--mount',
  '/bin/sh',
  '-c',
  `mount -t tmpfs tmpfs /tmp && mkdir -p /tmp/.session ${WORK} && exec 3<&0 4>&1 </dev/null >>/tmp/.session/stdout 2>>/tmp/.session/stderr && exec "$@"`,
  'kernel',
];
const KERNELS: Record<'python' | 'node', { language: LanguageDefinition; executable: string }> = {
  python: { language: python, executable: '/usr/bin/python3' },
  node: { language: node, executable: process.execPath },
};

async function startKernel(lang: 'python' | 'node'): Promise<GuestProcess> {
  const { language, executable } = KERNELS[lang];
  const toolchain: Toolchain = { hostExecutable: executable, executable, version: '', mounts: [] };
  const invocation = language.kernel!(toolchain, { memoryBytes: 512 << 20 }, WORK);
  const kernel = startGuest([...OWN_TMP, ...invocation.argv], { frameFd: 1, env: { ...process.env, ...invocation.env } });
  const ready = (await kernel.next()) as { ready: boolean; version: string };
  assert.ok(Value.Check(KernelReadySchema, ready), JSON.stringify(ready));
  if (lang === 'node') assert.equal(ready.version, process.versions.node);
  else assert.match(ready.version, /^3\.\d+\.\d+$/);
  return kernel;
}

let ids = 0;
/** One request; its reply, of the shape the host checks (contract/session-kernel.ts), less its id. */
async function ask(kernel: GuestProcess, request: Record<string, unknown>): Promise<Record<string, unknown>> {
  const id = (ids += 1);
  kernel.send({ id, ...request });
  const reply = (await kernel.next()) as Record<string, unknown>;
  assert.equal(reply.id, id, JSON.stringify(reply));
  const schema = request.op === 'cell' || request.op === 'command' ? KernelRunReplySchema : KernelFileReplySchema;
  assert.ok(Value.Check(schema, reply), JSON.stringify(reply));
  const { id: _id, ...rest } = reply;
  return rest;
}

const cell = (code: string) => ({ op: 'cell', code, timeout_ms: 10_000, output_bytes: 1 << 20 });
const base64 = (text: string) => Buffer.from(text).toString('base64');

const CODE = {
  define: { python: 'x = 41', node: 'var x = 41;' },
  useAndShow: { python: 'print(x + 1)\nx + 1', node: 'console.log(x + 1);\nx + 1' },
  raise: { python: 'raise ValueError("bad")', node: 'throw new TypeError("bad");' },
  /** One whole frame, in the kernel's framing, written to the reply fd by the cell itself. */
  forge: { python: FORGE_FRAME.python(4, '{"id": 99, "forged": true}'), node: FORGE_FRAME.node(4, '{"id": 99, "forged": true}') },
  /** A header that declares a frame over any maximum. */
  forgeHuge: {
    python: 'import os\nos.write(4, b"\\x7f\\xff\\xff\\xffforged reply")',
    node: 'require("node:fs").writeSync(4, Buffer.concat([Buffer.from([0x7f, 0xff, 0xff, 0xff]), Buffer.from("forged reply")]));',
  },
};

for (const lang of ['python', 'node'] as const) {
  describe(`${lang} session kernel, straight over a pipe`, () => {
    it('answers cells in order, names persisting, with the value and the captured output', async () => {
      const kernel = await startKernel(lang);
      const empty = { stdout: '', stdout_bytes: 0, stderr: '', stderr_bytes: 0 };
      assert.deepEqual(await ask(kernel, cell(CODE.define[lang])), { status: 'ok', error: null, value: null, exit_code: 0, ...empty });
      assert.deepEqual(await ask(kernel, cell(CODE.useAndShow[lang])), {
        status: 'ok',
        error: null,
        value: '42',
        value_bytes: 2,
        exit_code: 0,
        ...empty,
        stdout: '42\n',
        stdout_bytes: 3,
      });
      const failed = await ask(kernel, cell(CODE.raise[lang]));
      assert.equal(failed.status, 'error');
      assert.equal(failed.exit_code, 1);
      assert.equal(failed.error, lang === 'python' ? 'ValueError: bad' : 'TypeError: bad');
      assert.match(String(failed.stderr), /bad/);
      kernel.endInput();
      assert.equal(await kernel.exited, 0, 'the kernel ends when its requests do');
    });

    it('reads frames split across writes and several frames in one write', async () => {
      const kernel = await startKernel(lang);
      const first = encodeFrame({ id: 1001, ...cell(CODE.define[lang]) });
      const second = encodeFrame({ id: 1002, ...cell(CODE.useAndShow[lang]) });
      for (const piece of [first.subarray(0, 2), first.subarray(2, 7), first.subarray(7)]) {
        kernel.write(piece);
        // Apart in time, so the kernel sees the pieces in separate reads.
        await sleep(20);
      }
      assert.equal(((await kernel.next()) as { id: number }).id, 1001);
      kernel.write(Buffer.concat([second, encodeFrame({ id: 1003, op: 'read', path: 'missing.txt', max_bytes: 10 })]));
      const [b, c] = [(await kernel.next()) as Record<string, unknown>, (await kernel.next()) as Record<string, unknown>];
      assert.deepEqual([b.id, b.value], [1002, '42']);
      assert.deepEqual(c, { id: 1003, error: { code: 'not_found', message: 'missing.txt does not exist' } });
      kernel.endInput();
      assert.equal(await kernel.exited, 0);
    });

    it("a frame a cell forges on fd 4 reaches the host ahead of the kernel's reply, framed like it: the host must check every reply", async () => {
      const kernel = await startKernel(lang);
      kernel.send({ id: 1, ...cell(CODE.forge[lang]) });
      assert.deepEqual(await kernel.next(), { id: 99, forged: true });
      const reply = (await kernel.next()) as Record<string, unknown>;
      assert.deepEqual([reply.id, reply.status], [1, 'ok']);
    });

    it("a forged header over the frame maximum is refused by the host's decoder", async () => {
      const kernel = await startKernel(lang);
      kernel.send({ id: 1, ...cell(CODE.forgeHuge[lang]) });
      await assert.rejects(kernel.next(), { code: 'frame.too_large', message: /^frame of 2147483647 bytes exceeds the maximum/ });
    });

    it('runs commands, writes and reads files of the work dir, and refuses a path whose links leave it', async () => {
      const kernel = await startKernel(lang);
      assert.deepEqual(await ask(kernel, { op: 'command', argv: ['/bin/sh', '-c', 'echo out; echo err >&2; ln -s / escape; exit 3'], timeout_ms: 10_000, output_bytes: 1024 }), {
        status: 'error',
        exit_code: 3,
        error: null,
        value: null,
        stdout: 'out\n',
        stdout_bytes: 4,
        stderr: 'err\n',
        stderr_bytes: 4,
      });
      const missing = await ask(kernel, { op: 'command', argv: ['no-such-program'], timeout_ms: 10_000, output_bytes: 1024 });
      assert.deepEqual([missing.status, missing.exit_code], ['error', 127]);
      assert.deepEqual(await ask(kernel, { op: 'write', path: 'dir/file.txt', data: base64('héllo') }), { bytes: 6 });
      assert.deepEqual(await ask(kernel, { op: 'read', path: 'dir/file.txt', max_bytes: 100 }), { data: base64('héllo') });
      assert.deepEqual(await ask(kernel, { op: 'read', path: 'dir/file.txt', max_bytes: 2 }), {
        error: { code: 'too_large', message: 'dir/file.txt has 6 bytes, over the limit of 2' },
      });
      assert.deepEqual(await ask(kernel, { op: 'read', path: 'dir', max_bytes: 100 }), {
        error: { code: 'not_a_file', message: 'dir is not a regular file (a directory, FIFO, socket or device): only regular files are read and written' },
      });
      const escaped = (await ask(kernel, { op: 'read', path: 'escape/etc/hostname', max_bytes: 100 })) as { error: { code: string; message: string } };
      assert.equal(escaped.error.code, 'os_error');
      assert.match(escaped.error.message, /escape\/etc\/hostname leaves the work dir/);
      kernel.endInput();
      assert.equal(await kernel.exited, 0);
    });
  });
}
