import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Sandbox } from 'e2b';
import WebSocket from 'ws';
import { availableKinds, kindLeftOut } from '../../helpers/backends.js';
import { testRuntime } from '../../helpers/runtime.js';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

const PORT_SERVER = readFileSync(fileURLToPath(new URL('../../fixtures/ports/port_server.py', import.meta.url)), 'utf8');

type Answer = { status: number; headers: IncomingHttpHeaders; body: string };

/**
 * A request to the service as a client of a sandbox's port sends it: its Host the SDK's
 * `getHost(port)` (`{port}-{id}.{domain}`, a wildcard name that leads here), or E2B's headers.
 */
function ask(server: ServerProcess, path: string, headers: Record<string, string>, body?: Buffer | ((write: (chunk: Buffer) => void) => void | Promise<void>)): Promise<Answer> {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const sent = request({ hostname, port, path, method: body ? 'POST' : 'GET', headers }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.on('end', () => resolve({ status: answer.statusCode!, headers: answer.headers, body: Buffer.concat(chunks).toString('utf8') }));
      answer.on('error', reject);
    });
    sent.on('error', reject);
    if (typeof body === 'function') void Promise.resolve(body((chunk) => sent.write(chunk))).then(() => sent.end());
    else {
      if (body) sent.write(body);
      sent.end();
    }
  });
}

/**
 * Bytes written to the service as they are, and what it answers until it closes the connection.
 * `endFirst`: the client ends its side once written (else the server closes first).
 */
function raw(server: ServerProcess, text: string, { endFirst } = { endFirst: true }): Promise<string> {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => (endFirst ? socket.end(text) : socket.write(text)));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', reject);
  });
}

/** Connections one sandbox's ports may have open at once in these tests (sandboxes.ports.maxConnectionsPerSandbox). */
const CONNECTIONS_PER_SANDBOX = 4;

describe("a sandbox's ports through the service (E2B's getHost)", async () => {
  const kinds = await availableKinds(testRuntime(), 'run-job');
  let server: ServerProcess;
  before(async () => {
    server = await startServer([], { env: { AGENT_RUNNER_SANDBOXES__PORTS__MAX_CONNECTIONS_PER_SANDBOX: String(CONNECTIONS_PER_SANDBOX) } });
  });
  after(async () => {
    await server.stop();
  });
  const opts = () => ({ apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });

  /**
   * The SDK's own bounds on a request and a command (60 s) are not what these test: a microVM
   * under emulation on a loaded machine passed them.
   */
  const patientMs = 300_000;

  /** A sandbox of `kind` serving port_server.py on `port`, once it answers. */
  async function serving(port: number, options: Parameters<typeof Sandbox.create>[1] = {}): Promise<Sandbox> {
    const sandbox = await Sandbox.create('base', { requestTimeoutMs: patientMs, ...opts(), ...options });
    await sandbox.files.write('port_server.py', PORT_SERVER);
    await (await sandbox.commands.run(`python3 port_server.py ${port}`, { background: true, timeoutMs: 0 })).disconnect();
    const headers = { host: sandbox.getHost(port), 'e2b-traffic-access-token': sandbox.trafficAccessToken ?? '' };
    await waitUntil(async () => (await ask(server, '/', headers)).status === 200, 'the server in the sandbox answers', { timeoutMs: patientMs });
    return sandbox;
  }

  // The microVM under emulation (TCG, no KVM here) moves a port's upload at some 0.5 MiB/s: 100
  // MiB would take minutes of the suite, so it is sent 2 MiB (docs/sandboxes.md, Ports: 40 MiB
  // pass whole in 74 s).
  for (const [kind, uploadMib] of [
    ['local_process', 100],
    ['gvisor', 100],
    ['microvm', 2],
  ] as const) {
    const skip = kindLeftOut(kind) || (!kinds.includes(kind) && `${kind} is not available here`);
    it(`${kind}: HTTP by name and by E2B's headers, a stream as it is written, a ${uploadMib} MiB upload, a WebSocket both ways, a closed port's answer`, { skip }, async () => {
      const local = kind === 'local_process' ? server : await startServer([], { env: { AGENT_RUNNER_BACKENDS__DEFAULT: kind } });
      const previous = server;
      server = local;
      try {
        const sandbox = await serving(8000);
        const byName = { host: sandbox.getHost(8000) };
        assert.deepEqual(await ask(server, '/', byName).then(({ status, body }) => [status, body]), [200, 'hello from the sandbox\n']);
        // Its servers are reached by `localhost` from inside it too: the name resolves without a network.
        const fromInside = `python3 -c "import urllib.request; print(urllib.request.urlopen('http://localhost:8000/host').read().decode())"`;
        assert.equal((await sandbox.commands.run(fromInside, { timeoutMs: patientMs })).stdout, 'localhost:8000\n');
        const byHeaders = { 'e2b-sandbox-id': sandbox.sandboxId, 'e2b-sandbox-port': '8000' };
        assert.equal((await ask(server, '/host', byHeaders)).status, 200);
        // Its processes are its own: the relay of a connection is not one of them.
        assert.deepEqual(
          (await sandbox.commands.list()).map((process) => process.args.join(' ')),
          ['-l -c python3 port_server.py 8000'],
        );

        // A stream: the first event is read before the server writes the second.
        const { hostname, port } = new URL(server.url);
        const events = await new Promise<string[]>((resolve, reject) => {
          const seen: string[] = [];
          request({ hostname, port, path: '/stream', headers: byName }, (answer) => {
            answer.setEncoding('utf8');
            answer.on('data', (chunk: string) => {
              seen.push(chunk);
              if (seen.length === 1) void sandbox.files.write('go', '');
            });
            answer.on('end', () => resolve(seen));
          })
            .on('error', reject)
            .end();
        });
        assert.deepEqual(events.join('').split('\n\n').filter(Boolean), ['data: first', 'data: second']);

        // Uploaded in chunks, whole.
        const mebibytes = uploadMib;
        const chunk = randomBytes(1 << 20);
        const digest = createHash('sha256');
        for (let i = 0; i < mebibytes; i++) digest.update(chunk);
        const upload = await ask(server, '/sha256', { ...byName, 'transfer-encoding': 'chunked' }, (write) => {
          for (let i = 0; i < mebibytes; i++) write(chunk);
        });
        assert.equal(upload.body, `${digest.digest('hex')} ${mebibytes << 20}`);

        // A WebSocket: 100 messages each way, in order.
        const socket = new WebSocket(`${server.url.replace('http', 'ws')}/ws`, { headers: byName });
        await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
        const echoed: string[] = [];
        socket.on('message', (data: Buffer) => echoed.push(data.toString('utf8')));
        for (let i = 0; i < 100; i++) socket.send(`message ${i}`);
        await waitUntil(() => echoed.length === 100, 'every message comes back', { timeoutMs: patientMs });
        assert.deepEqual(
          echoed,
          Array.from({ length: 100 }, (_, i) => `message ${i}`),
        );
        socket.close();

        // Nobody listens on 8001: E2B's answer for a closed port, at once.
        const closed = await ask(server, '/', { host: sandbox.getHost(8001) });
        assert.equal(closed.status, 502);
        assert.deepEqual(JSON.parse(closed.body), { sandboxId: sandbox.sandboxId, message: 'The sandbox is running but port is not open', port: 8001, code: 502 });
        await sandbox.kill();
        // A sandbox that is gone: E2B's answer for it.
        const gone = await ask(server, '/', byName);
        assert.equal(gone.status, 502);
        assert.equal(JSON.parse(gone.body).message, 'The sandbox was not found');
      } finally {
        server = previous;
        if (local !== previous) await local.stop();
      }
    });
  }

  it("allowPublicTraffic false asks for the traffic token; maskRequestHost is the Host its server sees; one sandbox's port is never another's", async () => {
    const privateOne = await serving(8000, { network: { allowPublicTraffic: false, maskRequestHost: 'localhost:${PORT}' } });
    const byName = { host: privateOne.getHost(8000) };
    assert.ok(privateOne.trafficAccessToken);
    assert.equal((await ask(server, '/host', byName)).status, 403);
    assert.equal((await ask(server, '/host', { ...byName, 'e2b-traffic-access-token': 'not-it' })).status, 403);
    const allowed = await ask(server, '/host', { ...byName, 'e2b-traffic-access-token': privateOne.trafficAccessToken });
    assert.deepEqual([allowed.status, allowed.body], [200, 'localhost:8000']);
    // Another sandbox, nothing on its 8000: the first one's server is not reached through it.
    const other = await Sandbox.create('base', opts());
    assert.equal((await ask(server, '/host', { host: other.getHost(8000) })).status, 502);
    await Promise.all([privateOne.kill(), other.kill()]);
  });

  it("past its share of open connections a sandbox's port answers 429 at once; other sandboxes are served meanwhile, and it again once one closes", async () => {
    const [busy, other] = await Promise.all([serving(8000), serving(8000)]);
    const byName = { host: busy.getHost(8000) };
    const sockets = await Promise.all(
      Array.from({ length: CONNECTIONS_PER_SANDBOX }, async () => {
        const socket = new WebSocket(`${server.url.replace('http', 'ws')}/ws`, { headers: byName });
        await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
        return socket;
      }),
    );
    const refused = await ask(server, '/host', byName);
    assert.equal(refused.status, 429, refused.body);
    assert.match(JSON.parse(refused.body).message, /connections to its ports open, the most it may/);
    const upgrade = new WebSocket(`${server.url.replace('http', 'ws')}/ws`, { headers: byName });
    const status = await new Promise<number>((resolve) => upgrade.once('unexpected-response', (_, answer) => resolve(answer.statusCode!)).once('error', () => resolve(0)));
    assert.equal(status, 429);
    assert.equal((await ask(server, '/host', { host: other.getHost(8000) })).status, 200);
    sockets[0]!.close();
    await waitUntil(async () => (await ask(server, '/host', byName)).status === 200, 'a connection closed, the next is served');
    for (const socket of sockets) socket.close();
    const metrics = (await api(server.url, 'GET', '/metrics')).text;
    assert.match(metrics, /agent_runner_sandbox_port_connections_total\{kind="http",outcome="limited"[^}]*\} [1-9]/);
    assert.match(metrics, /agent_runner_sandbox_port_connections_total\{kind="upgrade",outcome="limited"[^}]*\} [1-9]/);
    assert.match(metrics, /agent_runner_sandbox_port_connections_total\{kind="upgrade",outcome="opened"[^}]*\} [4-9]/);
    await Promise.all([busy.kill(), other.kill()]);
  });

  it("a connection by a sandbox port's name is served on: requests one after another on it, the service's own among them; more connections from one address than it may hold at once, one after another", async () => {
    const sandbox = await serving(8000);
    const host = sandbox.getHost(8000);
    // Requests on one connection: the front door hands it over whole to the worker, which serves
    // the sandbox's and sends the service's own back to the front door, in order.
    const sandboxRequest = `GET /host HTTP/1.1\r\nHost: ${host}\r\n`;
    // The last asks the connection closed once answered: the client itself does not end it first.
    const answers = await raw(server, `${sandboxRequest}\r\nGET /health HTTP/1.1\r\nHost: localhost\r\n\r\n${sandboxRequest}Connection: close\r\n\r\n`, { endFirst: false });
    assert.deepEqual(
      [...answers.matchAll(/HTTP\/1\.1 (\d+) /g)].map((match) => match[1]),
      ['200', '200', '200'],
      answers,
    );
    assert.equal(answers.split(host).length - 1, 2, answers);
    assert.match(answers, /"status":"ok"/);
    // Each connection handed over is let go by the front door's count of its address (128 at once).
    for (let i = 0; i < 150; i++) assert.equal((await ask(server, '/host', { host, connection: 'close' })).status, 200, `connection ${i}`);
    await sandbox.kill();
  });

  it('a service that handed connections over still stops on SIGTERM', async () => {
    const own = await startServer([]);
    try {
      const sandbox = await Sandbox.create('base', { ...opts(), apiKey: own.token!, apiUrl: own.url, sandboxUrl: own.url });
      await sandbox.files.write('port_server.py', PORT_SERVER);
      await (await sandbox.commands.run('python3 port_server.py 8000', { background: true, timeoutMs: 0 })).disconnect();
      await waitUntil(async () => (await ask(own, '/host', { host: sandbox.getHost(8000) })).status === 200, 'the server in the sandbox answers');
      // Node's own tracking of a socket sent to a child kept the front door's server from closing once the worker was gone.
      own.child.kill('SIGTERM');
      await waitUntil(() => own.child.exitCode !== null || own.child.signalCode !== null, 'the service exits on SIGTERM', { timeoutMs: 120_000 });
      assert.deepEqual([own.child.exitCode, own.child.signalCode], [0, null]);
    } finally {
      await own.stop();
    }
  });

  it("request smuggling and hosts that are not a sandbox's port get a 4xx; the sandbox's server sees only well-formed requests", async () => {
    const sandbox = await serving(8000);
    const host = sandbox.getHost(8000);
    const seen = async () => (await ask(server, '/seen', { host })).body;
    const before = await seen();
    const smuggled = `GET /smuggled HTTP/1.1\r\nHost: ${host}\r\n\r\n`;
    const attempts = [
      // Content-Length and Transfer-Encoding both: which ends the body is the classic desync.
      `POST /sha256 HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
      `POST /sha256 HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n0\r\n\r\n${smuggled}`,
      // Two lengths that differ.
      `POST /sha256 HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 0\r\nContent-Length: 40\r\n\r\n${smuggled}`,
      // A Transfer-Encoding that is not chunked last, and one hidden by a space before its colon.
      `POST /sha256 HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n${smuggled}`,
      `POST /sha256 HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n${smuggled}`,
      // A header folded over two lines (obsolete line folding).
      `GET / HTTP/1.1\r\nHost: ${host}\r\nX-Folded: a\r\n b\r\n\r\n`,
    ];
    for (const attempt of attempts) {
      const answer = await raw(server, attempt);
      assert.match(answer, /^HTTP\/1\.1 4\d\d /, `${JSON.stringify(attempt)} -> ${answer.slice(0, 200)}`);
      assert.doesNotMatch(answer, /hello from the sandbox|HTTP\/1\.1 200/);
    }
    // Hosts that name the service itself or another host are this service's own routes (a 4xx
    // here), never passed anywhere: it is no open proxy.
    const { host: service } = new URL(server.url);
    for (const other of [service, 'example.com', `8000-${sandbox.sandboxId}.e2b.app.example.com:80`.replace(/^8000-/, 'x8000-'), `8000-not.an.id.e2b.app`]) {
      const answer = await ask(server, '/', { host: other });
      assert.ok(answer.status >= 400 && answer.status < 500, `Host ${other}: ${answer.status} ${answer.body}`);
    }
    assert.equal(await seen(), before, 'the server in the sandbox saw none of them');
    await sandbox.kill();
  });

  it("an upload to a sandbox's port outlasts the service's request deadline: a sandbox's traffic is held to the header deadline only", async () => {
    const deadlineMs = 1000;
    const strict = await startServer([], {
      env: { AGENT_RUNNER_SERVICE__CLIENTS__HEADERS_TIMEOUT_MS: String(deadlineMs), AGENT_RUNNER_SERVICE__CLIENTS__REQUEST_TIMEOUT_MS: String(deadlineMs) },
    });
    const previous = server;
    server = strict;
    try {
      const sandbox = await serving(8000);
      const chunk = randomBytes(64 * 1024);
      const upload = await ask(server, '/sha256', { host: sandbox.getHost(8000), 'transfer-encoding': 'chunked' }, async (write) => {
        write(chunk);
        // Past the deadline (and Node's check of it, a quarter of it apart) with the body unfinished.
        await sleep(3 * deadlineMs);
        write(chunk);
      });
      assert.equal(upload.body, `${createHash('sha256').update(chunk).update(chunk).digest('hex')} ${2 * chunk.length}`);
      await sandbox.kill();
    } finally {
      server = previous;
      await strict.stop();
    }
  });

  it('refuses ports and ids that name nothing, with a 400', async () => {
    const id = 'a'.repeat(24);
    for (const port of ['0', '65536', 'http', '-1']) {
      const answer = await ask(server, '/', { 'e2b-sandbox-id': id, 'e2b-sandbox-port': port });
      assert.equal(answer.status, 400, `port ${port}: ${answer.body}`);
    }
    assert.equal((await ask(server, '/', { host: `0-${id}.e2b.app` })).status, 400);
    assert.equal((await ask(server, '/', { host: `70000-${id}.e2b.app` })).status, 400);
    assert.equal((await ask(server, '/', { 'e2b-sandbox-id': 'a.b/c', 'e2b-sandbox-port': '8000' })).status, 400);
  });
});
