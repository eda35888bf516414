import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { AgentEndEvent } from '../../../src/contract/sandbox-agent.js';
import { loadConfig } from '../../../src/config/load.js';
import { RunnerRuntime } from '../../../src/runner/runtime.js';
import type { SandboxAgentPort } from '../../../src/sandboxes/agent-port.js';
import { Sandboxes } from '../../../src/sandboxes/sandboxes.js';
import { availableKinds } from '../../helpers/backends.js';
import { EgressUpstream } from '../../helpers/egress-upstream.js';
import { helpersOfOurs } from '../../helpers/processes.js';
import { TEST_STATE_DIR } from '../../helpers/runtime.js';
import { waitUntil } from '../../helpers/wait.js';

/**
 * Egress on every backend, for long-lived sandboxes: one the operator lets reach the internet,
 * on a backend without user-mode networking (gVisor), gets its own egress proxy for any name,
 * which still refuses names that lead to the host or private ranges; nothing else answers it.
 * Without internet it gets nothing. The world is a network namespace of this test's
 * (helpers/egress-upstream.ts), the proxy's resolver and upstream roots the backend's seams for it.
 */

const IS_ROOT = process.getuid?.() === 0;
const upstream = new EgressUpstream();

const addresses = (): Record<string, string[]> => ({
  'api.test.example': [upstream.address],
  'host.test.example': [upstream.hostAddress],
  'loopback.test.example': ['127.0.0.1'],
  'private.test.example': ['10.20.30.40'],
});

const runtime = new RunnerRuntime(loadConfig({ ...process.env, AGENT_RUNNER_SANDBOXES__ALLOW_INTERNET_ACCESS: 'true' }, { stateDir: TEST_STATE_DIR }), {
  egress: upstream.hostOptions(addresses),
});

/** Each [label, url] fetched with urllib (which follows the proxy variables), then each [label, address, port] tried directly. */
const CLIENT = String.raw`
import json, os, socket, ssl, sys, urllib.request, urllib.error
context = ssl.create_default_context(cafile="test-upstream-ca.txt")
opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))
seen = {"proxy": os.environ.get("HTTPS_PROXY")}
for label, url in json.loads(sys.argv[1]):
    try:
        with opener.open(url, timeout=20) as response:
            seen[label] = {"status": response.status, "body": json.loads(response.read())}
    except urllib.error.HTTPError as error:
        seen[label] = {"status": error.code, "body": error.read().decode()}
    except OSError as error:
        seen[label] = {"error": str(error)}
for label, address, port in json.loads(sys.argv[2]):
    try:
        socket.create_connection((address, port), timeout=10).close()
        seen[label] = "connected"
    except OSError as error:
        seen[label] = type(error).__name__
print(json.dumps(seen))
`;

type Seen = Record<string, { status?: number; body?: unknown; error?: string } | string | null>;

/** Runs the client in the sandbox to its end and reads what it saw. */
async function fetchFrom(agent: SandboxAgentPort, fetches: Array<[string, string]>, direct: Array<[string, string, number]>): Promise<Seen> {
  for (const [path, text] of [
    ['/home/user/client.py', CLIENT],
    ['/home/user/test-upstream-ca.txt', upstream.caPem],
  ] as const) {
    await agent.request({ op: 'write', path, data: Buffer.from(text), append: false });
  }
  const out: Record<string, Buffer[]> = { stdout: [], stderr: [], pty: [] };
  const end = await new Promise<AgentEndEvent>((resolve, reject) => {
    agent
      .start(
        { op: 'start', cmd: 'python3', args: ['client.py', JSON.stringify(fetches), JSON.stringify(direct)], envs: {}, stdin: false },
        { output: (event) => void out[event.stream]!.push(event.data), end: resolve },
      )
      .catch(reject);
  });
  const stdout = Buffer.concat(out.stdout!).toString();
  assert.equal(end.exit_code, 0, `${stdout} ${Buffer.concat(out.stderr!).toString()}`);
  return JSON.parse(stdout) as Seen;
}

// Described before any test is registered (see snippet/conformance.test.ts for why).
const kinds = IS_ROOT ? await availableKinds(runtime, 'run-job') : [];

describe('a sandbox with internet on a backend without user-mode networking', { skip: IS_ROOT ? false : 'needs root: network namespaces, veths and the relay' }, () => {
  const sandboxes = new Sandboxes(runtime);
  /** A service of the host's on every address: no sandbox reaches it. */
  const hostService = createServer((socket) => socket.end('host service\n'));
  before(async () => {
    await upstream.start(Object.keys(addresses()));
    await new Promise<void>((resolve) => hostService.listen(0, '0.0.0.0', resolve));
  });
  after(async () => {
    await sandboxes.close();
    upstream.stop();
    hostService.close();
    await runtime.dispose();
  });

  // gVisor only here: the microVM takes the same network (its egress tests run the proxy there).
  for (const kind of kinds.filter((kind) => kind === 'gvisor')) {
    it(`on ${kind}: reaches any public name through its own proxy, never the host nor a private range; it goes with the sandbox`, async () => {
      const { port } = hostService.address() as AddressInfo;
      const sandbox = await sandboxes.create({ backend: { kind }, allow_internet_access: true });
      assert.equal(sandbox.internet_access, true);
      const seen = await fetchFrom(
        sandboxes.access(sandbox.id)!.agent,
        [
          ['http', 'http://api.test.example/'],
          ['https', 'https://api.test.example/'],
          ['host', 'http://host.test.example/'],
          ['loopback', 'http://loopback.test.example/'],
          ['private', 'https://private.test.example/'],
        ],
        [
          ['host loopback', '127.0.0.1', port],
          ['host address', upstream.hostAddress, port],
          ['upstream directly', upstream.address, 80],
        ],
      );
      const detail = JSON.stringify(seen);
      assert.match(String(seen.proxy), /^http:\/\//, detail);
      assert.deepEqual(seen.http, { status: 200, body: { secure: false, host: 'api.test.example', servername: null, authorization_sha256: null, placeholder: null } }, detail);
      assert.equal((seen.https as { status: number }).status, 200, detail);
      assert.match(String((seen.host as { body: string }).body), /an address of this host/, detail);
      assert.match(String((seen.loopback as { body: string }).body), /resolves to 127\.0\.0\.1, which policy\.network never reaches/, detail);
      assert.match(String((seen.private as { error: string }).error), /Tunnel connection failed: 403/, detail);
      for (const label of ['host loopback', 'host address', 'upstream directly']) assert.notEqual(seen[label], 'connected', `${label}: ${detail}`);
      assert.ok(helpersOfOurs('/usr/bin/socat').length > 0, 'the sandbox has its relay while it runs');

      await sandboxes.kill(sandbox.id);
      await waitUntil(() => helpersOfOurs('/usr/bin/socat').length === 0, "the sandbox's relay is gone with it");
      await waitUntil(() => helpersOfOurs('/usr/bin/sleep').length === 0, 'the holder of its namespace is gone with it');
    });

    it(`on ${kind}: a paused sandbox's proxy stops with it (its files kept: runsc saves no sandbox on the host's stack); resumed or forked, each gets a new one`, async () => {
      const sandbox = await sandboxes.create({ backend: { kind }, allow_internet_access: true });
      const before = await fetchFrom(sandboxes.access(sandbox.id)!.agent, [['http', 'http://api.test.example/']], []);
      assert.equal((before.http as { status?: number }).status, 200, JSON.stringify(before));
      const paused = await sandboxes.pause(sandbox.id);
      assert.deepEqual({ internet_access: paused.internet_access, kept: paused.kept }, { internet_access: true, kept: 'files' });
      await waitUntil(() => helpersOfOurs('/usr/bin/socat').length === 0, "the paused sandbox's relay is gone");
      await waitUntil(() => helpersOfOurs('/usr/bin/sleep').length === 0, 'and the holder of its namespace');
      const { sandbox: resumed } = await sandboxes.resume(sandbox.id);
      assert.equal(resumed.internet_access, true);
      const after = await fetchFrom(sandboxes.access(sandbox.id)!.agent, [['http', 'http://api.test.example/']], []);
      assert.equal((after.http as { status?: number }).status, 200, JSON.stringify(after));
      const fork = (await sandboxes.fork(sandbox.id)).forks[0]?.sandbox;
      assert.ok(fork, 'the fork was made');
      assert.equal(fork.internet_access, true);
      const fromFork = await fetchFrom(sandboxes.access(fork.id)!.agent, [['http', 'http://api.test.example/']], []);
      assert.equal((fromFork.http as { status?: number }).status, 200, JSON.stringify(fromFork));
      await Promise.all([sandboxes.kill(sandbox.id), sandboxes.kill(fork.id)]);
      await waitUntil(() => helpersOfOurs('/usr/bin/socat').length === 0, 'the relays of the resumed sandbox and its fork are gone with them');
    });

    it(`on ${kind}: a sandbox made without internet reaches nothing and says so`, async () => {
      const sandbox = await sandboxes.create({ backend: { kind }, allow_internet_access: false });
      assert.equal(sandbox.internet_access, false);
      const seen = await fetchFrom(sandboxes.access(sandbox.id)!.agent, [['http', 'http://api.test.example/']], [['upstream directly', upstream.address, 80]]);
      assert.equal(seen.proxy, null);
      assert.ok((seen.http as { error?: string }).error, JSON.stringify(seen));
      assert.notEqual(seen['upstream directly'], 'connected');
      await sandboxes.kill(sandbox.id);
    });
  }
});
