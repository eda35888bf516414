import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KernelRunReplySchema } from '../../../src/contract/session-kernel.js';
import { KernelChannel, KernelLost } from '../../../src/session/kernel-channel.js';
import { encodeFrame, FrameDecoder } from '../../../src/wire/frame-codec.js';

const CELL = { op: 'cell', code: 'x', timeout_ms: 1000, output_bytes: 100 } as const;
const REPLY = { status: 'ok', exit_code: 0, error: null, value: '1', stdout: '', stderr: '', stdout_bytes: 0, stderr_bytes: 0 };

/** A channel whose kernel is played by the test: what the host sends is decoded, replies are pushed in. */
function kernelChannel() {
  const channel = new KernelChannel(1024, 100);
  const sent: Array<Record<string, unknown>> = [];
  const decoder = new FrameDecoder();
  channel.stdin.on('data', (chunk: Buffer) => decoder.push(chunk, (message) => sent.push(message as Record<string, unknown>)));
  const reply = (message: unknown) => channel.stdout.write(encodeFrame(message));
  return { channel, sent, reply };
}

async function lostWith(promise: Promise<unknown>, pattern: RegExp): Promise<KernelLost> {
  const error = await promise.then(
    () => assert.fail('it resolved'),
    (error: unknown) => error,
  );
  assert.ok(error instanceof KernelLost, String(error));
  assert.match(error.message, pattern);
  return error;
}

describe('the host end of a session kernel', () => {
  it('waits for the ready message, then matches each reply to its request by id', async () => {
    const { channel, sent, reply } = kernelChannel();
    reply({ ready: true, version: '3.11.2' });
    assert.deepEqual(await channel.started(), { ready: true, version: '3.11.2' });
    const answer = channel.request(CELL, KernelRunReplySchema, 1000);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(sent, [{ ...CELL, id: 1 }]);
    reply({ ...REPLY, id: 1 });
    assert.equal((await answer).value, '1');
  });

  it('loses the kernel on a reply out of protocol: every request then fails at once', async () => {
    const { channel, reply } = kernelChannel();
    reply({ ready: true, version: '1' });
    const answer = channel.request(CELL, KernelRunReplySchema, 1000);
    reply({ ...REPLY, id: 1, exit_code: 'zero' });
    await lostWith(answer, /out of protocol/);
    await lostWith(channel.request(CELL, KernelRunReplySchema, 1000), /out of protocol/);
  });

  it('loses the kernel on bytes that are not frames, or a frame over the size it allows', async () => {
    const garbage = kernelChannel();
    const answer = garbage.channel.request(CELL, KernelRunReplySchema, 1000);
    garbage.channel.stdout.write(Buffer.from('garbage that a cell printed to the protocol fd'));
    await lostWith(answer, /not the protocol: .*exceeds the maximum/);

    const unasked = kernelChannel();
    const pending = unasked.channel.request(CELL, KernelRunReplySchema, 1000);
    unasked.reply({ ...REPLY, id: 99 });
    await lostWith(pending, /nobody asked for \(id 99\)/);
  });

  it('loses the kernel when a request gets no answer by its deadline, saying it was the deadline', async () => {
    const { channel } = kernelChannel();
    const error = await lostWith(channel.request(CELL, KernelRunReplySchema, 20), /no answer within/);
    assert.equal(error.deadline, true);
  });

  it('a kernel that never says it is ready fails its start', async () => {
    const { channel, reply } = kernelChannel();
    reply({ id: 0, status: 'ok' });
    await assert.rejects(channel.started(), KernelLost);
  });
});
