import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { SnippetResponse } from '../../../src/contract/snippet.js';
import { MAX_UNANSWERED, serveConnection } from '../../../src/guest/connection.js';
import { encodeFrame } from '../../../src/wire/frame-codec.js';

const timers = () => process.getActiveResourcesInfo().filter((resource) => resource === 'Timeout').length;
const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

describe('a guest connection', () => {
  it('leaves no deadline armed once its peer is gone, whatever its jobs and frames were doing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'guest-connection-'));
    const answer: SnippetResponse = { trace_id: '', stdout: '', stderr: '', exit_code: 0, error: '' };
    let finishFirst!: () => void;
    let started = 0;
    let settled = 0;
    let served!: Socket;
    const closed = new Promise<void>((resolve) => {
      const server = createServer((socket) => {
        served = socket;
        // The first job ends when the test says; the others run until the connection's signal stops them.
        const handle = (_request: unknown, signal: AbortSignal) =>
          new Promise<SnippetResponse>((resolve) => {
            const end = () => {
              resolve(answer);
              settled += 1;
            };
            if (started++ === 0) finishFirst = end;
            // Stopping a job takes a while (its sandbox is killed): it ends after the socket closed.
            else signal.addEventListener('abort', () => setTimeout(end, 20));
          });
        serveConnection(socket, handle, 1 << 20, () => undefined, { deadlines: { authMs: 60_000, idleMs: 60_000, frameMs: 60_000 } });
        socket.on('close', () => server.close(() => resolve()));
      }).listen(join(dir, 'guest.sock'));
    });
    try {
      const before = timers();
      const client = connect(join(dir, 'guest.sock')).on('error', () => undefined);
      await new Promise((resolve) => client.once('connect', resolve));
      // Far more frames than the server reads before it stops reading: bytes are left unread,
      // one of them a frame under way, and the server never sees the end of the stream.
      const frame = encodeFrame({ lang: 'bash', code: `sleep 30 # ${'x'.repeat(64 * 1024)}` });
      for (let index = 0; index < 64; index += 1) client.write(frame);
      while (started < MAX_UNANSWERED) await tick();
      client.destroy();
      // The first answer goes to a peer that is gone: the write fails and the socket closes;
      // the other jobs are stopped, and each one's end used to arm a deadline again.
      finishFirst();
      await closed;
      while (settled < MAX_UNANSWERED) await tick();
      await tick();
      assert.ok(served.destroyed);
      // At most as many as before: another test's leftover timer may have fired meanwhile.
      assert.ok(timers() <= before, process.getActiveResourcesInfo().join(', '));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
