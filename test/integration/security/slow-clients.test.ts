import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

/**
 * Security round 2, class 7 (exhaustion of the faces), its slow-client half: 600 slow clients
 * each sending half a request body kept the service from answering others. Now a request has a
 * deadline for its headers and one for the whole of it (408 `request.timeout`, connection
 * closed), and connections are bounded per client address and in all: past the bound a new
 * connection is closed at once, so a slow client costs itself, not the service.
 *
 * The deadlines are short here, and the only timing asserted is generous: a stalled socket is
 * closed within its deadline plus SLACK_MS (Node looks for them a quarter deadline apart).
 */

const HEADERS_MS = 4_000;
// The window in which 600 connections open, 560 are refused and another client is answered
// while the half bodies still hang: a loaded CI machine needs room (8 s was tight).
const REQUEST_MS = 20_000;
const SLACK_MS = 15_000;
const PER_ADDRESS = 40;

const clientBounds = (bounds: Record<string, number>): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(bounds).map(([name, value]) => [`AGENT_RUNNER_SERVICE__CLIENTS__${name}`, String(value)]));

type Kind = 'half-body' | 'trickled-headers' | 'silent';

/** A client that starts a request and never finishes it; what the server answered, and when it closed. */
interface StalledClient {
  kind: Kind;
  openedAt: number;
  closedAt: number | null;
  answer: string;
}

/**
 * Opens `count` connections from `localAddress` (each loopback address is a client address of
 * its own), each stalling as `kind` says: headers and half a body, headers a byte at a time, or
 * nothing at all. Resolves once every one has connected or been closed.
 */
async function stallClients(server: ServerProcess, localAddress: string, kinds: Kind[]): Promise<{ clients: StalledClient[]; sockets: Socket[] }> {
  const { hostname, port } = new URL(server.url);
  const clients: StalledClient[] = [];
  const sockets: Socket[] = [];
  await Promise.all(
    kinds.map(
      (kind) =>
        new Promise<void>((settled) => {
          const client: StalledClient = { kind, openedAt: Date.now(), closedAt: null, answer: '' };
          clients.push(client);
          const socket = connect({ host: hostname, port: Number(port), localAddress });
          sockets.push(socket);
          socket.on('data', (chunk: Buffer) => (client.answer += chunk.toString()));
          socket.on('error', () => undefined); // a refused connection is reset: that is the point
          socket.on('close', () => {
            client.closedAt = Date.now();
            settled();
          });
          socket.on('connect', () => {
            if (kind === 'half-body') socket.write(halfBody(server.token!));
            if (kind === 'trickled-headers') socket.write(`GET /v1/jobs HTTP/1.1\r\nHost: ${hostname}\r\nX-Slow: `);
            settled();
          });
        }),
    ),
  );
  return { clients, sockets };
}

/** A real, authenticated submission whose body stops halfway: the route waits for the rest. */
function halfBody(token: string): string {
  const body = JSON.stringify({ command: { argv: ['echo', 'x'.repeat(2000)] } });
  const head = `POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
  return head + body.slice(0, body.length / 2);
}

/** One more header byte every 250 ms to each open trickling socket: never idle, never done. */
function trickle(clients: StalledClient[], sockets: Socket[]): NodeJS.Timeout {
  return setInterval(() => {
    clients.forEach((client, index) => client.kind === 'trickled-headers' && client.closedAt === null && sockets[index]!.write('a'));
  }, 250);
}

const refused = (clients: StalledClient[]) => clients.filter((client) => client.closedAt !== null && client.answer === '');
const held = (clients: StalledClient[]) => clients.filter((client) => client.answer !== '' || client.closedAt === null);

/** Each connection the server kept was answered 408 request.timeout and closed within its deadline (plus slack). */
function assertTimedOut(clients: StalledClient[]): void {
  for (const client of held(clients)) {
    assert.match(client.answer, /^HTTP\/1\.1 408 /, `${client.kind}: ${client.answer}`);
    const body = JSON.parse(client.answer.slice(client.answer.indexOf('\r\n\r\n') + 4)) as { error: { code: string } };
    assert.equal(body.error.code, 'request.timeout');
    const deadline = client.kind === 'half-body' ? REQUEST_MS : HEADERS_MS;
    assert.ok(client.closedAt! - client.openedAt <= deadline + SLACK_MS, `${client.kind} closed after ${client.closedAt! - client.openedAt} ms; deadline ${deadline} ms`);
  }
}

describe('slow HTTP clients cost themselves, not the service', () => {
  const servers: ServerProcess[] = [];
  after(() => Promise.all(servers.map((server) => server.stop())));

  it('600 stalled connections from one address: 40 kept until their deadline (408), the rest closed at once; others are answered meanwhile', async () => {
    const server = await startServer(['--concurrency', '1'], {
      env: clientBounds({ HEADERS_TIMEOUT_MS: HEADERS_MS, REQUEST_TIMEOUT_MS: REQUEST_MS, MAX_CONNECTIONS_PER_ADDRESS: PER_ADDRESS }),
    });
    servers.push(server);
    const kinds = Array.from({ length: 600 }, (_, index): Kind => (index % 2 === 0 ? 'half-body' : 'trickled-headers'));
    const { clients, sockets } = await stallClients(server, '127.0.0.2', kinds);
    const trickling = trickle(clients, sockets);
    try {
      await waitUntil(() => refused(clients).length >= kinds.length - PER_ADDRESS, `all but ${PER_ADDRESS} connections are closed at once`, REQUEST_MS);

      // Another client (another address) is answered while the stalled ones still hang.
      const listed = await api(server.url, 'GET', '/v1/jobs');
      assert.equal(listed.status, 200, listed.text);
      const stillStalled = clients.filter((client) => client.kind === 'half-body' && client.closedAt === null).length;
      assert.ok(stillStalled > 0, 'answered before the stalled half bodies reached their deadline');
      const submitted = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'served'] } });
      assert.equal(submitted.status, 202, submitted.text);
      const done = await api(server.url, 'GET', `/v1/jobs/${submitted.json.job_id}?wait=60`);
      assert.equal(done.json.status, 'completed', JSON.stringify(done.json.result?.error));

      await waitUntil(() => clients.every((client) => client.closedAt !== null), 'the server closes every stalled connection', REQUEST_MS + SLACK_MS);
      assert.equal(refused(clients).length, kinds.length - PER_ADDRESS);
      assert.equal(held(clients).length, PER_ADDRESS);
      assertTimedOut(clients);
    } finally {
      clearInterval(trickling);
      sockets.forEach((socket) => socket.destroy());
    }
  });

  it('connections past maxConnections are closed at once; a silent connection is closed at the header deadline', async () => {
    const total = 30;
    const server = await startServer([], { env: clientBounds({ HEADERS_TIMEOUT_MS: HEADERS_MS, REQUEST_TIMEOUT_MS: REQUEST_MS, MAX_CONNECTIONS: total }) });
    servers.push(server);
    const { clients, sockets } = await stallClients(
      server,
      '127.0.0.3',
      Array.from({ length: 50 }, (): Kind => 'silent'),
    );
    try {
      await waitUntil(() => clients.every((client) => client.closedAt !== null), 'the server closes every silent connection', HEADERS_MS + SLACK_MS);
      assert.equal(refused(clients).length, 50 - total);
      assert.equal(held(clients).length, total);
      assertTimedOut(clients);
      // Freed: the service answers again.
      assert.equal((await api(server.url, 'GET', '/health')).status, 200);
    } finally {
      sockets.forEach((socket) => socket.destroy());
    }
  });

  it('a client that does not speak HTTP gets 400 request.malformed, in the error body of every route', async () => {
    const server = await startServer();
    servers.push(server);
    const { hostname, port } = new URL(server.url);
    const answer = await new Promise<string>((resolve) => {
      let text = '';
      const socket = connect({ host: hostname, port: Number(port) }, () => socket.write('NOT HTTP AT ALL\r\n\r\n'));
      socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(text));
    });
    assert.match(answer, /^HTTP\/1\.1 400 /);
    assert.equal(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).error.code, 'request.malformed');
  });
});

describe('answers before the body, and silent connections', () => {
  // Node's own request deadline is far off: only the service's own doing closes these in time.
  const env = clientBounds({ HEADERS_TIMEOUT_MS: 2_000, REQUEST_TIMEOUT_MS: 600_000, IDLE_TIMEOUT_MS: 600_000 });
  let server: ServerProcess;
  after(() => server?.stop());

  it('an unauthenticated POST announcing 1 GiB is answered 401 from its headers, and the connection closed without reading the body', async () => {
    server = await startServer([], { env });
    const { hostname, port } = new URL(server.url);
    let answer = '';
    let sent = 0;
    const socket = connect({ host: hostname, port: Number(port) }, () => {
      socket.write(`POST /v1/jobs HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: ${1 << 30}\r\n\r\n`);
    });
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    socket.on('error', () => undefined); // writing into a closed connection: that is the point
    let closed = false;
    socket.on('close', () => (closed = true));
    // A slow sender: a little of the body at a time, for as long as the server keeps the connection.
    const sending = setInterval(() => {
      if (!socket.writable) return;
      socket.write('x'.repeat(1024));
      sent += 1024;
    }, 50);
    try {
      await waitUntil(() => closed, 'the server closes the connection', 60_000);
    } finally {
      clearInterval(sending);
      socket.destroy();
    }
    assert.match(answer, /^HTTP\/1\.1 401 /);
    assert.match(answer, /\r\nconnection: close\r\n/i);
    assert.equal(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).error.code, 'auth.unauthorized');
    assert.ok(sent < 1 << 20, `closed after ${sent} bytes of the body, long before its end`);
  });

  it('a connection that never sends a byte is answered 408 and closed by the server', async () => {
    server ??= await startServer([], { env });
    const { hostname, port } = new URL(server.url);
    let answer = '';
    const socket = connect({ host: hostname, port: Number(port) });
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    socket.on('error', () => undefined);
    let closed = false;
    socket.on('close', () => (closed = true));
    try {
      await waitUntil(() => closed, 'the server closes the silent connection', 60_000);
    } finally {
      socket.destroy();
    }
    assert.match(answer, /^HTTP\/1\.1 408 /);
    assert.equal(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).error.code, 'request.timeout');
  });
});
