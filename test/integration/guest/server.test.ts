import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { SnippetResponse } from '../../../src/contract/snippet.js';
import { GuestClient } from '../../../src/guest/client.js';
import { startGuestServer, type GuestServer } from '../../../src/guest/server.js';
import { encodeFrame, FrameDecoder } from '../../../src/wire/frame-codec.js';
import { testRuntime } from '../../helpers/runtime.js';

/** Sends raw bytes, then collects every frame the server answers until it closes the connection. */
function rawExchange(server: GuestServer, bytes: Buffer, endAfterWrite: boolean): Promise<{ frames: SnippetResponse[]; closedByServer: boolean }> {
  return new Promise((resolve, reject) => {
    const address = server.address as { kind: 'unix'; path: string };
    const socket: Socket = connect({ path: address.path, allowHalfOpen: true });
    const decoder = new FrameDecoder();
    const frames: SnippetResponse[] = [];
    socket.on('data', (chunk) => decoder.push(chunk, (frame) => frames.push(frame as SnippetResponse)));
    socket.on('error', reject);
    socket.on('end', () => {
      socket.end();
      resolve({ frames, closedByServer: true });
    });
    socket.write(bytes, () => {
      if (endAfterWrite) socket.end();
    });
  });
}

function lengthPrefix(length: number): Buffer {
  const header = Buffer.alloc(4);
  header.writeUInt32BE(length, 0);
  return header;
}

describe('guest runner', () => {
  const runtime = testRuntime();
  let server: GuestServer;
  const socketPath = join(mkdtempSync(join(tmpdir(), 'guest-test-')), 'guest.sock');

  before(async () => {
    server = await startGuestServer({ kind: 'unix', path: socketPath }, { runtime, concurrency: 2, maxFrameBytes: 64 * 1024 });
  });
  after(() => server.close());

  it('serves many pipelined requests on one connection, answering in request order', async () => {
    const client = await GuestClient.connect({ kind: 'unix', path: socketPath });
    const requests = Array.from({ length: 6 }, (_, index) => ({
      trace_id: `pipe-${index}`,
      lang: 'python',
      // Earlier requests take longer, so finishing order differs from request order.
      code: `import time\ntime.sleep(${(6 - index) * 0.05})\nprint(${index})`,
    }));
    const responses = await Promise.all(requests.map((request) => client.request(request)));
    client.close();
    assert.deepEqual(
      responses.map((response) => response.trace_id),
      requests.map((request) => request.trace_id),
    );
    assert.deepEqual(
      responses.map((response) => response.stdout),
      requests.map((_, index) => `${index}\n`),
    );
  });

  it('serves several connections at once, never running more than its concurrency', async () => {
    const clients = await Promise.all([1, 2, 3].map(() => GuestClient.connect({ kind: 'unix', path: socketPath })));
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, server.running())), 5);
    const responses = await Promise.all(clients.map((client, index) => client.request({ lang: 'bash', code: `sleep 0.3; echo ${index}` })));
    clearInterval(sampler);
    for (const client of clients) client.close();
    assert.deepEqual(
      responses.map((response) => response.stdout),
      ['0\n', '1\n', '2\n'],
    );
    assert.ok(peak <= 2, `peak concurrency ${peak}`);
  });

  it('answers a request that is valid JSON but not a valid request, and keeps the connection', async () => {
    const client = await GuestClient.connect({ kind: 'unix', path: socketPath });
    const bad = await client.request({ lang: 'python' });
    const good = await client.request({ lang: 'python', code: 'print("still here")' });
    client.close();
    assert.equal(bad.exit_code, 2);
    assert.match(bad.error, /code is required/);
    assert.equal(good.stdout, 'still here\n');
  });

  const protocolErrors: Array<[string, Buffer, boolean, RegExp]> = [
    ['an oversize frame', lengthPrefix(64 * 1024 + 1), false, /frame\.too_large/],
    ['a truncated frame', Buffer.concat([lengthPrefix(100), Buffer.from('{"lang"')]), true, /frame\.truncated/],
    ['invalid UTF-8', Buffer.concat([lengthPrefix(3), Buffer.from([0xff, 0xfe, 0xfd])]), false, /frame\.invalid_utf8/],
    ['invalid JSON', Buffer.concat([lengthPrefix(5), Buffer.from('{"a":')]), false, /frame\.invalid_json/],
    ['a zero-length frame', lengthPrefix(0), false, /frame\.empty/],
  ];
  for (const [name, bytes, endAfterWrite, code] of protocolErrors) {
    it(`answers ${name} with a protocol error, closes that connection, and keeps serving others`, async () => {
      const { frames, closedByServer } = await rawExchange(server, bytes, endAfterWrite);
      assert.ok(closedByServer);
      assert.equal(frames.length, 1);
      assert.equal(frames[0]!.exit_code, 2);
      assert.match(frames[0]!.error, code);
      const client = await GuestClient.connect({ kind: 'unix', path: socketPath });
      const after = await client.request({ lang: 'bash', code: 'echo healthy' });
      client.close();
      assert.equal(after.stdout, 'healthy\n');
    });
  }

  it('answers the requests before a protocol error, then the error', async () => {
    const bytes = Buffer.concat([encodeFrame({ trace_id: 'before', lang: 'bash', code: 'echo first' }), lengthPrefix(5), Buffer.from('nope!')]);
    const { frames } = await rawExchange(server, bytes, false);
    assert.deepEqual(
      frames.map((frame) => frame.trace_id),
      ['before', ''],
    );
    assert.equal(frames[0]!.stdout, 'first\n');
    assert.match(frames[1]!.error, /frame\.invalid_json/);
  });

  it('listens on tcp too', async () => {
    const tcp = await startGuestServer({ kind: 'tcp', host: '127.0.0.1', port: 0 }, { runtime });
    try {
      const address = tcp.address as { kind: 'tcp'; host: string; port: number };
      assert.ok(address.port > 0);
      const client = await GuestClient.connect(address);
      const response = await client.request({ trace_id: 'tcp', lang: 'node', code: 'console.log(6 * 7)' });
      client.close();
      assert.equal(response.stdout, '42\n');
    } finally {
      await tcp.close();
    }
  });
});
