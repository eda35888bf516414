import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo, type Server } from 'node:net';
import { lookup } from 'node:dns/promises';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it, type TestContext } from 'node:test';
import { loadConfig } from '../../../src/runner/config.js';
import { runJob } from '../../../src/runner/run-job.js';
import { RunnerRuntime } from '../../../src/runner/runtime.js';
import { BubblewrapBackend } from '../../../src/isolation/bubblewrap/bubblewrap-backend.js';
import { DEFAULT_NETWORK_TOOLS } from '../../../src/isolation/host/job-network.js';
import { api, startServer } from '../../helpers/server.js';
import { TEST_STATE_DIR, testRuntime } from '../../helpers/runtime.js';
import { waitUntil } from '../../helpers/wait.js';
import { makeWorkspace } from '../../helpers/workspace.js';

/**
 * Security round 2, class 2, its network half: a run job with network allowed has a network
 * namespace of its own behind user-mode networking (pasta), and reaches nothing of the host:
 * not its loopback, not any of its addresses (where a service on 0.0.0.0 answers), not
 * link-local or metadata addresses, each refused at once rather than left to time out. An
 * allowlist narrows it to TCP host:port pairs, with names pinned and no DNS. Without pasta a
 * job asking for network does not run (never on the host's network instead), and pasta dies
 * with the job, or with the runner if it is killed.
 *
 * Tests that need the outside world (only the npm registry and the Debian mirror are reachable
 * from CI) say so and skip when the host itself cannot reach it.
 */

const CLI = fileURLToPath(new URL('../../../dist/cli/agent-runner.js', import.meta.url));
const OUTSIDE = { host: 'registry.npmjs.org', port: 443 };
const OTHER_OUTSIDE = { host: 'deb.debian.org', port: 80 };
/** Added to the host's loopback interface for these tests: an address of the host that pasta does not copy into the job. */
const EXTRA_HOST_ADDRESS = '198.51.100.77';
const IS_ROOT = process.getuid?.() === 0;

/** Tries each [label, host, port] from inside the job; prints {label: outcome}. */
const PROBE = String.raw`
import errno, json, socket, sys
outcomes = {}
for label, host, port in json.loads(sys.argv[1]):
    try:
        socket.create_connection((host, port), timeout=10).close()
        outcomes[label] = "connected"
    except socket.timeout:
        outcomes[label] = "timeout"
    except socket.gaierror:
        # A link-local address scoped to a host interface the job has not (another test's, made
        # meanwhile) names no way out of the job: unreachable. A name that does not resolve: no-name.
        outcomes[label] = "unreachable" if "%" in host else "no-name"
    except OSError as error:
        outcomes[label] = "refused" if error.errno == errno.ECONNREFUSED else "unreachable" if error.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES, errno.EPERM) else errno.errorcode.get(error.errno, str(error))
print(json.dumps(outcomes))
`;

type Target = [label: string, host: string, port: number];

const runtime = testRuntime();
after(() => runtime.dispose());

async function probe(network: unknown, targets: Target[], options: { runtime?: RunnerRuntime } = {}) {
  const result = await runJob(
    { workspace: { source: 'local_path', path: makeWorkspace({ 'probe.py': PROBE }) }, command: { argv: ['python3', 'probe.py', JSON.stringify(targets)] }, policy: { network } },
    { runtime: options.runtime ?? runtime },
  );
  return { result, outcomes: result.status === 'completed' ? (JSON.parse(result.stdout.text) as Record<string, string>) : {} };
}

function listen(host: string): Promise<Server & { port: number }> {
  const server = createServer((socket) => {
    socket.on('error', () => undefined); // a job reset it: it got here, which its outcome says
    socket.end('reached');
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port: 0, ipv6Only: false }, () => resolve(Object.assign(server, { port: (server.address() as AddressInfo).port })));
  });
}

/** Whether this host reaches host:port at all (the outside world is not always there). */
function reachable({ host, port }: { host: string; port: number }): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port, timeout: 5000 }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', () => resolve(false));
  });
}

async function skipWithoutOutside(t: TestContext): Promise<boolean> {
  if (await reachable(OUTSIDE)) return false;
  t.skip(`needs the outside network: ${OUTSIDE.host}:${OUTSIDE.port} is unreachable from this host, so egress cannot be shown`);
  return true;
}

/** Live pasta processes: pid, parent and argv. */
function pastaProcesses(): Array<{ pid: number; ppid: number; argv: string[] }> {
  const found = [];
  for (const name of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (argv[0]?.endsWith('pasta')) found.push({ pid: Number(name), ppid, argv });
    } catch {
      // It exited while we looked.
    }
  }
  return found;
}

/** pasta processes serving jobs of a runner whose state dir is `stateDir`. */
const pastaUnder = (stateDir: string) => pastaProcesses().filter(({ argv }) => argv.some((arg) => arg.startsWith(`${stateDir}/`)));

describe('a run job with network "allow"', () => {
  let loopback: Server & { port: number };
  let everywhere: Server & { port: number };
  before(async () => {
    loopback = await listen('127.0.0.1');
    everywhere = await listen('::');
    if (IS_ROOT) execFileSync('ip', ['address', 'add', `${EXTRA_HOST_ADDRESS}/32`, 'dev', 'lo']);
  });
  after(() => {
    loopback.close();
    everywhere.close();
    if (IS_ROOT) execFileSync('ip', ['address', 'del', `${EXTRA_HOST_ADDRESS}/32`, 'dev', 'lo']);
  });

  /** Every way to the host a job might try: its loopback, each of its addresses, link-local, metadata. */
  function hostTargets(): Target[] {
    const targets: Target[] = [
      ['loopback listener', '127.0.0.1', loopback.port],
      ['0.0.0.0 listener on loopback', '127.0.0.1', everywhere.port],
      ['0.0.0.0 listener on ::1', '::1', everywhere.port],
      ['metadata address', '169.254.169.254', 80],
      ['link-local address', '169.254.1.1', 80],
    ];
    if (IS_ROOT) targets.push(['an address of the host on another interface', EXTRA_HOST_ADDRESS, everywhere.port]);
    for (const [name, entries] of Object.entries(networkInterfaces())) {
      for (const entry of entries ?? []) {
        // Other test files' egress upstreams come and go on veths in TEST-NET-3 (test/helpers/
        // egress-upstream.ts) while this runs: one removed mid-probe timed out, as any vanished
        // address does. They are those files' fixtures, not the host's own addresses.
        if (entry.internal || entry.address.startsWith('203.0.113.')) continue;
        const host = entry.family === 'IPv6' && entry.address.startsWith('fe80:') ? `${entry.address}%${name}` : entry.address;
        targets.push([`0.0.0.0 listener on ${host}`, host, everywhere.port]);
      }
    }
    return targets;
  }

  it('reaches nothing of the host: loopback, its addresses, link-local and metadata are refused at once', async () => {
    const targets = hostTargets();
    const { result, outcomes } = await probe('allow', targets);
    assert.equal(result.status, 'completed', `${JSON.stringify(result.error)} ${result.stderr.text}`);
    assert.equal(Object.keys(outcomes).length, targets.length);
    // Refused or unreachable: never connected, and never a hang that only a timeout ends.
    for (const [label, outcome] of Object.entries(outcomes)) assert.ok(outcome === 'refused' || outcome === 'unreachable', `${label}: ${outcome} (${JSON.stringify(outcomes)})`);
  });

  it('cannot undo its rules: nft and ip fail inside the job, and the host stays refused', async () => {
    const script = String.raw`
import json, socket, subprocess
changes = [["/usr/sbin/nft", "flush", "ruleset"], ["/usr/sbin/ip", "route", "add", "169.254.0.0/16", "dev", "lo"], ["/usr/sbin/ip", "address", "add", "169.254.169.254/32", "dev", "lo"]]
failed = [subprocess.run(argv, capture_output=True, text=True).stderr for argv in changes]
try:
    socket.create_connection(("169.254.169.254", 80), timeout=10).close()
    metadata = "connected"
except OSError as error:
    metadata = type(error).__name__
print(json.dumps({"failed": failed, "metadata": metadata}))
`;
    const result = await runJob(
      { workspace: { source: 'local_path', path: makeWorkspace({ 'undo.py': script }) }, command: { argv: ['python3', 'undo.py'] }, policy: { network: 'allow' } },
      { runtime },
    );
    assert.equal(result.status, 'completed', result.stderr.text);
    const seen = JSON.parse(result.stdout.text) as { failed: string[]; metadata: string };
    for (const stderr of seen.failed) assert.match(stderr, /Operation not permitted/);
    assert.equal(seen.metadata, 'ConnectionRefusedError');
  });

  it('reaches the outside world, by name through the host resolver', async (t) => {
    if (await skipWithoutOutside(t)) return;
    const { result, outcomes } = await probe('allow', [
      ['registry', OUTSIDE.host, OUTSIDE.port],
      ['mirror', OTHER_OUTSIDE.host, OTHER_OUTSIDE.port],
    ]);
    assert.equal(result.status, 'completed', `${JSON.stringify(result.error)} ${result.stderr.text}`);
    assert.deepEqual(outcomes, { registry: 'connected', mirror: 'connected' });
  });

  it('an allowlist lets TCP to its pairs through and nothing else, with no DNS', async (t) => {
    if (await skipWithoutOutside(t)) return;
    const mirror = (await lookup(OTHER_OUTSIDE.host)).address;
    const { result, outcomes } = await probe({ allow: [`${OUTSIDE.host}:${OUTSIDE.port}`] }, [
      ['listed pair', OUTSIDE.host, OUTSIDE.port],
      ['listed host, other port', OUTSIDE.host, 80],
      ['other host by address', mirror, OTHER_OUTSIDE.port],
      ['other host by name', OTHER_OUTSIDE.host, OTHER_OUTSIDE.port],
    ]);
    assert.equal(result.status, 'completed', `${JSON.stringify(result.error)} ${result.stderr.text}`);
    assert.deepEqual(outcomes, { 'listed pair': 'connected', 'listed host, other port': 'refused', 'other host by address': 'refused', 'other host by name': 'no-name' });
  });

  it('an allowlist cannot open the host: its own addresses stay refused even when listed', async () => {
    const targets = hostTargets().filter(([, host]) => !host.includes('%'));
    const allow = targets.map(([, host, port]) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`));
    const { result, outcomes } = await probe({ allow }, targets);
    assert.equal(result.status, 'completed', `${JSON.stringify(result.error)} ${result.stderr.text}`);
    for (const [label, outcome] of Object.entries(outcomes)) assert.ok(outcome === 'refused' || outcome === 'unreachable', `${label}: ${outcome}`);
  });

  it('an allowed name that does not resolve on the host ends setup_failed naming it', async () => {
    const { result } = await probe({ allow: ['no-such-host.invalid:443'] }, []);
    assert.equal(result.status, 'setup_failed', JSON.stringify(result));
    assert.equal(result.error?.code, 'backend.setup_failed');
    assert.match(result.error!.message, /no-such-host\.invalid:443 does not resolve/);
  });

  it('leaves no pasta behind: after a job, a timeout and a cancel', async () => {
    // This process's own: other test files run jobs of their own meanwhile.
    const pastaOfOurs = () => pastaProcesses().filter(({ ppid }) => ppid === process.pid);
    assert.equal((await probe('allow', [])).result.status, 'completed');
    const timedOut = await runJob({ command: { argv: ['sleep', '30'] }, policy: { network: 'allow' }, limits: { timeout_ms: 500 } }, { runtime });
    assert.equal(timedOut.status, 'timed_out');
    const controller = new AbortController();
    // Canceled once its pasta is seen running, so the check below is not vacuous.
    let seenRunning = false;
    const canceled = await runJob(
      { command: { argv: ['sleep', '30'] }, policy: { network: 'allow' } },
      {
        runtime,
        signal: controller.signal,
        onRunning: () =>
          void waitUntil(() => pastaOfOurs().length > 0, 'the job has its pasta')
            .then(
              () => (seenRunning = true),
              () => undefined,
            )
            .then(() => controller.abort()),
      },
    );
    assert.ok(seenRunning, 'the job had a pasta while it ran');
    assert.equal(canceled.status, 'canceled');
    // SIGKILLed as each sandbox ended; gone once the kernel has delivered it.
    await waitUntil(() => pastaOfOurs().length === 0, 'every pasta of these jobs is gone');
  });
});

describe('network requests the runner refuses or cannot serve', () => {
  it('malformed allowlist entries are validation.invalid_request naming the entry (HTTP 422)', async () => {
    for (const [entry, field] of [
      ['pypi.org', 'policy.network.allow.0'],
      ['pypi.org:0', 'policy.network.allow.0'],
      ['pypi.org:65536', 'policy.network.allow.0'],
      ['[not-v6]:443', 'policy.network.allow.0'],
      ['[1:2:3]:443', 'policy.network.allow.0'],
      ['-bad-.example:443', 'policy.network.allow.0'],
    ] as const) {
      const result = await runJob({ command: { argv: ['true'] }, policy: { network: { allow: [entry] } } }, { runtime });
      assert.equal(result.status, 'failed', entry);
      assert.equal(result.error?.code, 'validation.invalid_request', entry);
      assert.equal(result.error?.details?.field, field, `${entry}: ${result.error?.message}`);
    }
    const empty = await runJob({ command: { argv: ['true'] }, policy: { network: { allow: [] } } }, { runtime });
    assert.equal(empty.error?.details?.field, 'policy.network.allow');
    const server = await startServer();
    try {
      const refused = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] }, policy: { network: { allow: ['pypi.org'] } } });
      assert.equal(refused.status, 422, refused.text);
      assert.equal(refused.json.error.code, 'validation.invalid_request');
      assert.equal(refused.json.error.details.field, 'policy.network.allow.0');
    } finally {
      await server.stop();
    }
  });

  it('runJob.allowNetwork false refuses any network, an allowlist included', async () => {
    const closed = new RunnerRuntime(loadConfig(process.env, { stateDir: TEST_STATE_DIR, runJob: { allowNetwork: false } }));
    try {
      for (const network of ['allow', { allow: ['pypi.org:443'] }]) {
        const result = await runJob({ command: { argv: ['true'] }, policy: { network } }, { runtime: closed });
        assert.equal(result.status, 'failed');
        assert.equal(result.error?.code, 'validation.invalid_request');
        assert.equal(result.error?.details?.field, 'policy.network');
      }
      assert.equal((await runJob({ command: { argv: ['true'] } }, { runtime: closed })).status, 'completed');
    } finally {
      await closed.dispose();
    }
  });

  it('without pasta a job asking for network ends backend_unavailable with the reason, never on the host network', async () => {
    const backend = new BubblewrapBackend({ runtimeDir: join(TEST_STATE_DIR, 'runtime'), networkTools: { ...DEFAULT_NETWORK_TOOLS, pasta: '/nonexistent/pasta' } });
    const missing = testRuntime({}, { backend });
    try {
      for (const network of ['allow', { allow: ['pypi.org:443'] }]) {
        const { result } = await probe(network, [], { runtime: missing });
        assert.equal(result.status, 'backend_unavailable', JSON.stringify(result));
        assert.equal(result.error?.code, 'backend.unavailable');
        assert.match(result.error!.message, /pasta is not installed at \/nonexistent\/pasta.*apt-get install passt/);
        assert.equal(result.exit_code, null, 'the command never ran');
      }
      assert.equal((await runJob({ command: { argv: ['true'] } }, { runtime: missing })).status, 'completed', 'jobs without network still run');
      const status = await backend.status();
      assert.ok(
        status.notes.some((note) => note.includes('pasta is not installed')),
        JSON.stringify(status.notes),
      );
    } finally {
      await missing.dispose();
    }
  });

  it('a runner killed mid-job leaves no pasta behind (it dies with its parent)', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'job-network-'));
    chmodSync(stateDir, 0o755);
    const cli = spawn(process.execPath, [CLI, 'run', '--network', 'allow', '--', 'sleep', '60'], { env: { ...process.env, AGENT_RUNNER_STATE_DIR: stateDir }, stdio: 'ignore' });
    const exited = new Promise((resolve) => cli.on('exit', resolve));
    try {
      await waitUntil(() => pastaUnder(stateDir).length > 0, 'the job has its pasta');
      cli.kill('SIGKILL');
      await exited;
      await waitUntil(() => pastaUnder(stateDir).length === 0, 'pasta is gone with the runner');
    } finally {
      cli.kill('SIGKILL');
      await exited;
      // What a killed CLI left (its work-dir mount, staging) is swept when a backend starts there.
      const sweeper = new BubblewrapBackend({ runtimeDir: join(stateDir, 'runtime') });
      await sweeper.status();
      await sweeper.dispose();
    }
  });
});
