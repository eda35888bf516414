import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GuestClient } from '../../../src/guest/client.js';
import { startGuestServer, type GuestServer } from '../../../src/guest/server.js';
import { encodeFrame } from '../../../src/wire/frame-codec.js';
import { testRuntime } from '../../helpers/runtime.js';
import { waitUntil } from '../../helpers/wait.js';

const MiB = 1024 * 1024;
const FRAMES = 100;

/** Resolves once `read()` has not changed for `quietMs`: the peer stopped taking bytes. */
async function settled(read: () => number, quietMs: number): Promise<number> {
  let last = -1;
  for (;;) {
    const now = read();
    if (now === last) return now;
    last = now;
    await new Promise((resolve) => setTimeout(resolve, quietMs));
  }
}

describe('the guest runner bounds what clients make it hold', () => {
  const runtime = testRuntime();
  let server: GuestServer;
  const socketPath = join(mkdtempSync(join(tmpdir(), 'guest-bp-')), 'guest.sock');
  before(async () => {
    server = await startGuestServer({ kind: 'unix', path: socketPath }, { runtime, concurrency: 1, maxFrameBytes: 2 * MiB, maxConnections: 4 });
  });
  after(async () => {
    await server.close();
    await runtime.dispose();
  });

  it(`${FRAMES} pipelined 1 MiB frames wait in the client's buffer, not in the server's memory`, async () => {
    const socket: Socket = connect({ path: socketPath });
    socket.on('error', () => undefined);
    const frame = encodeFrame({ lang: 'bash', code: `sleep 30 # ${'x'.repeat(MiB - 64)}` }, 2 * MiB);
    for (let index = 0; index < FRAMES; index += 1) socket.write(frame);
    await waitUntil(() => server.running() === 1, 'the first request runs');
    // What left our buffer (writableLength is what Node still holds for the socket).
    const taken = await settled(() => FRAMES * frame.length - socket.writableLength, 500);
    socket.destroy();
    // Four unanswered frames, plus what the kernel's socket buffers hold; not the 100 MiB sent.
    assert.ok(taken < 40 * MiB, `the server took ${Math.round(taken / MiB)} MiB of ${FRAMES} MiB`);
    await waitUntil(() => server.running() === 0, "the hung-up client's job is stopped");
  });

  it('connections past the limit are refused, and the server keeps serving', async () => {
    const held = Array.from({ length: 4 }, () => connect({ path: socketPath }).on('error', () => undefined));
    await Promise.all(held.map((socket) => new Promise((resolve) => socket.once('connect', resolve))));
    const extra = connect({ path: socketPath });
    const closed = await new Promise<boolean>((resolve) => {
      extra.on('error', () => resolve(true));
      extra.on('close', () => resolve(true));
    });
    assert.ok(closed);
    held.forEach((socket) => socket.destroy());
    await waitUntil(async () => {
      const client = await GuestClient.connect({ kind: 'unix', path: socketPath }).catch(() => null);
      if (!client) return false;
      try {
        return (await client.request({ lang: 'bash', code: 'echo ok' })).stdout === 'ok\n';
      } finally {
        client.close();
      }
    }, 'a new client is served');
  });
});
