import assert from 'node:assert/strict';
import { lstatSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { withinReach } from '../../../src/util/unix-socket-path.js';

describe('unix socket paths of any length', () => {
  it('listens and connects at a path past the 107 bytes a socket address holds', async () => {
    const root = mkdtempSync(join(tmpdir(), 'socket-path-'));
    const deep = join(root, 'a-directory-name-of-forty-characters-xx', 'another-directory-name-of-forty-chars-x', 'and-one-more');
    mkdirSync(deep, { recursive: true });
    const path = join(deep, 'channel.sock');
    assert.ok(Buffer.byteLength(path) > 107, path);
    const server = createServer((socket) => socket.end('hello'));
    try {
      await withinReach(path, (reachable) => new Promise<void>((resolve) => server.listen(reachable, resolve)));
      // Node's own listen at such a path binds at it cut to 107 bytes, elsewhere, without a word.
      assert.ok(lstatSync(path).isSocket(), 'the socket is where it was asked for');
      const socket = await withinReach(
        path,
        (reachable) =>
          new Promise<Socket>((resolve, reject) => {
            const client = connect(reachable, () => resolve(client));
            client.once('error', reject);
          }),
      );
      const chunks: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      await once(socket, 'end');
      assert.equal(Buffer.concat(chunks).toString(), 'hello');
    } finally {
      server.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
