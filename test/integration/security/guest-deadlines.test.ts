import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import type { SnippetResponse } from '../../../src/contract/snippet.js';
import { GuestClient } from '../../../src/guest/client.js';
import type { ConnectionDeadlines } from '../../../src/guest/connection.js';
import { startGuestServer, type GuestServer } from '../../../src/guest/server.js';
import { encodeFrame, FrameDecoder } from '../../../src/wire/frame-codec.js';
import { testRuntime } from '../../helpers/runtime.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from '../../helpers/timeouts.js';
import { waitUntil } from '../../helpers/wait.js';

const TOKEN = 'guest-deadlines-token';
const CONNECTIONS = 64;
/** Small, so the test is quick; nothing below asserts how long anything took. */
const DEADLINE_MS = 500;
/** The deadlines a test is not about: a loaded CI machine needs room (an honest client's own auth or request once took longer than 500 ms). */
const NOT_THE_SUBJECT_MS = NOT_THE_SUBJECT_TIMEOUT_S * 1000;

/** A raw TCP client: the frames the server sent it, and whether the server closed it. */
function rawClient(port: number): { socket: Socket; frames: Array<Partial<SnippetResponse> & { ok?: boolean }>; connected: Promise<void>; closed: Promise<void> } {
  const socket = connect({ host: '127.0.0.1', port });
  const frames: Array<Partial<SnippetResponse> & { ok?: boolean }> = [];
  const decoder = new FrameDecoder();
  socket.on('data', (chunk: Buffer) => decoder.push(chunk, (message) => frames.push(message as SnippetResponse)));
  socket.on('error', () => undefined);
  return {
    socket,
    frames,
    connected: new Promise((resolve) => socket.once('connect', () => resolve())),
    closed: new Promise((resolve) => socket.once('close', () => resolve())),
  };
}

/** Connects, authenticates and asks for one snippet; null when the server turned it away. */
async function servedAnswer(port: number): Promise<SnippetResponse | null> {
  const client = await GuestClient.connect({ kind: 'tcp', host: '127.0.0.1', port }, { token: TOKEN }).catch(() => null);
  if (!client) return null;
  try {
    return await client.request({ lang: 'bash', code: 'echo served' });
  } catch {
    return null;
  } finally {
    client.close();
  }
}

describe('the guest runner: connections that do not authenticate, idle, or stall in a frame do not hold its slots', () => {
  const runtime = testRuntime();
  const servers: GuestServer[] = [];
  /** A server on which only the deadlines given are short: those of the test's subject. */
  async function serverWith(short: Array<keyof ConnectionDeadlines>): Promise<number> {
    const deadlines = { authMs: NOT_THE_SUBJECT_MS, idleMs: NOT_THE_SUBJECT_MS, frameMs: NOT_THE_SUBJECT_MS };
    for (const name of short) deadlines[name] = DEADLINE_MS;
    const server = await startGuestServer({ kind: 'tcp', host: '127.0.0.1', port: 0 }, { runtime, token: TOKEN, deadlines });
    servers.push(server);
    return (server.address as { port: number }).port;
  }
  after(async () => {
    for (const server of servers) await server.close();
    await runtime.dispose();
  });

  it(`${CONNECTIONS} idle connections that never send {"auth": ...} are closed with an error frame, and an authenticated client gets its answer`, async () => {
    const port = await serverWith(['authMs']);
    const idle = Array.from({ length: CONNECTIONS }, () => rawClient(port));
    after(() => idle.forEach(({ socket }) => socket.destroy()));
    await Promise.all(idle.map(({ connected }) => connected));
    let answer: SnippetResponse | null = null;
    await waitUntil(async () => (answer = await servedAnswer(port)) !== null, 'an authenticated client is served', 30_000);
    assert.equal(answer!.stdout, 'served\n');
    await Promise.all(idle.map(({ closed }) => closed));
    for (const { frames } of idle) {
      assert.equal(frames.length, 1);
      assert.equal(frames[0]!.ok, false);
      assert.match(frames[0]!.error ?? '', /^unauthorized: no \{"auth": TOKEN\} frame within/);
    }
  });

  it('an authenticated connection that begins a frame and stalls is closed with an error frame', async () => {
    const client = rawClient(await serverWith(['frameMs']));
    client.socket.write(encodeFrame({ auth: TOKEN }));
    await waitUntil(() => client.frames.length === 1, 'authenticated');
    const header = Buffer.alloc(4);
    header.writeUInt32BE(1000);
    client.socket.write(Buffer.concat([header, Buffer.from('{"lang": "bash"')]));
    await client.closed;
    assert.equal(client.frames[0]!.ok, true);
    assert.match(client.frames[1]?.error ?? '', /^a frame was begun and not completed within/);
  });

  it('an authenticated connection with nothing to answer that sends nothing is closed as idle', async () => {
    const client = rawClient(await serverWith(['idleMs']));
    client.socket.write(encodeFrame({ auth: TOKEN }));
    await client.closed;
    assert.equal(client.frames[0]!.ok, true);
    assert.match(client.frames[1]?.error ?? '', /^idle: nothing received for/);
  });

  // Past those that could cut a job: the auth deadline is over once the client has authenticated.
  it('a job that runs past every deadline is not cut: its client gets the answer', async () => {
    const port = await serverWith(['idleMs', 'frameMs']);
    const client = await GuestClient.connect({ kind: 'tcp', host: '127.0.0.1', port }, { token: TOKEN });
    try {
      const response = await client.request({ lang: 'bash', code: `sleep ${(4 * DEADLINE_MS) / 1000}; echo finished` });
      assert.equal(response.stdout, 'finished\n', JSON.stringify(response));
    } finally {
      client.close();
    }
  });
});
