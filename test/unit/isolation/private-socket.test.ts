import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { listenPrivateSocket } from '../../../src/isolation/host/private-socket.js';

describe("a private unix socket (a worker's envd, a front door's)", () => {
  const before = process.env.TMPDIR;
  afterEach(() => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
  });

  it('listens in a directory of its own that only root may enter, removed when it closes', async () => {
    // Short: the suite's own temporary directory is long already.
    const base = mkdtempSync(join(tmpdir(), 'p-'));
    process.env.TMPDIR = base;
    try {
      const server = createServer((socket) => socket.end('hi'));
      const listening = await listenPrivateSocket(server, 't');
      assert.equal(dirname(dirname(listening.socketPath)), base);
      assert.equal(statSync(dirname(listening.socketPath)).mode & 0o777, 0o700);
      const said = await new Promise<string>((resolve) => {
        let text = '';
        connect(listening.socketPath)
          .on('data', (chunk) => (text += chunk))
          .on('end', () => resolve(text));
      });
      assert.equal(said, 'hi');
      await listening.close();
      assert.deepEqual(readdirSync(base), []);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('refuses a path the kernel would cut short (it was bound outside its directory), leaving nothing behind', async () => {
    const base = mkdtempSync(join(tmpdir(), 'p-'));
    const long = join(base, 'x'.repeat(100));
    mkdirSync(long);
    process.env.TMPDIR = long;
    try {
      await assert.rejects(listenPrivateSocket(createServer(), 't'), /is longer than 107 bytes: set TMPDIR to a shorter directory/);
      assert.deepEqual(readdirSync(long), []);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});
