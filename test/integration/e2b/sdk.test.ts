import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { CommandExitError, FileNotFoundError, RateLimitError, Sandbox, SandboxNotFoundError, Template, TimeoutError, type FilesystemEvent } from 'e2b';
import type { BackendKind } from '../../../src/contract/backend-kinds.js';
import { Filesystem } from '../../../src/envd/gen/filesystem/filesystem_pb.js';
import { Process } from '../../../src/envd/gen/process/process_pb.js';
import { availableKinds, kindLeftOut } from '../../helpers/backends.js';
import { testRuntime } from '../../helpers/runtime.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from '../../helpers/timeouts.js';
import { waitUntil } from '../../helpers/wait.js';

const PYTHON = '/usr/bin/python3';
/** Two clients of one service beside its token: alice may hold one running sandbox. */
const API_KEYS = { alice: { key: 'alice-key-0123456789', maxSandboxes: 1 }, bob: { key: 'bob-key-01234567890' } };

/** The host pid of the process whose argv[0] is `name`, once there is one. */
async function hostPidNamed(name: string): Promise<string> {
  const cmdlineOf = (pid: string) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      return ''; // ended since the listing
    }
  };
  let found: string | undefined;
  await waitUntil(() => (found = readdirSync('/proc').find((pid) => /^\d+$/.test(pid) && cmdlineOf(pid).split('\0')[0] === name)) !== undefined, `${name} runs on the host`);
  return found!;
}

function hostUidOf(pid: string): number {
  return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
}

/** The status of GET /health sent to the service under another host name (fetch keeps Host its own). */
function statusByHost(url: string, host: string): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ hostname, port, path: '/health', headers: { host } }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('error', reject).end();
  });
}

/**
 * The unmodified `e2b` SDK against `agent-runner serve`, with E2B_API_URL and E2B_SANDBOX_URL both
 * pointing at it: the control plane (create, connect, list, timeout, kill) and each sandbox's
 * envd (commands, pty, files, watches), through the front door to the worker process's sandboxes.
 * The whole surface on local_process; what differs by backend (the sandbox itself) on gVisor and
 * the microVM too.
 */
describe('the e2b SDK against agent-runner', async () => {
  let server: ServerProcess;
  const kinds = await availableKinds(testRuntime(), 'run-job');
  const opts = () => ({ apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });
  const created: Sandbox[] = [];
  const create = async (options: Parameters<typeof Sandbox.create>[1] = {}) => {
    const sandbox = await Sandbox.create('base', { ...opts(), ...options });
    created.push(sandbox);
    return sandbox;
  };

  before(async () => {
    server = await startServer([], { env: { AGENT_RUNNER_SANDBOXES__MAX: '16', AGENT_RUNNER_SERVICE__API_KEYS: JSON.stringify(API_KEYS) } });
  });
  after(async () => {
    await Promise.all(created.map((sandbox) => sandbox.kill().catch(() => undefined)));
    await server.stop();
  });

  for (const kind of ['local_process', 'gvisor', 'microvm'] as const satisfies readonly BackendKind[]) {
    const skip = kindLeftOut(kind) || (!kinds.includes(kind) && `${kind} is not available here`);
    it(`runs a command, keeps a file, opens a terminal and is killed on ${kind}`, { skip }, async () => {
      const backend = kind === 'local_process' ? {} : { AGENT_RUNNER_BACKENDS__DEFAULT: kind };
      const local = Object.keys(backend).length === 0 ? server : await startServer([], { env: backend });
      try {
        // The SDK's own bounds on a request and a command (60 s) are not what this tests: a loaded
        // machine (a microVM under emulation beside another run of the suite) passed them.
        const patientMs = NOT_THE_SUBJECT_TIMEOUT_S * 1000;
        const sandbox = await Sandbox.create('base', { requestTimeoutMs: patientMs, apiKey: local.token!, apiUrl: local.url, sandboxUrl: local.url, envs: { GREETING: 'hello' } });
        const run = (command: string, options: { user?: 'root' } = {}) => sandbox.commands.run(command, { timeoutMs: patientMs, ...options });
        const result = await run('echo "$GREETING from $(pwd) as $(whoami)"; echo oops >&2');
        assert.deepEqual({ exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr }, { exitCode: 0, stdout: 'hello from /home/user as user\n', stderr: 'oops\n' });
        await sandbox.files.write('notes/today.txt', 'kept');
        assert.equal((await run('cat notes/today.txt')).stdout, 'kept');
        // E2B's root: uid 0 of the sandbox's own namespace or VM where the backend has one
        // (capabilities.root_inside), else the user. What root writes, the user may not change.
        const rootInside = kind !== 'gvisor';
        const owners = `${PYTHON} -c 'import os, pwd, sys; print(*(pwd.getpwuid(os.stat(path).st_uid).pw_name for path in sys.argv[1:]))'`;
        const asRoot = await run(`whoami; touch by-root.sh; ${owners} by-root.sh`, { user: 'root' });
        assert.equal(asRoot.stdout, rootInside ? 'root\nroot\n' : 'user\nuser\n');
        await sandbox.files.write('/home/user/by-root.txt', 'root wrote this', { user: 'root' });
        const asUser = await run(`${owners} by-root.txt notes/today.txt; echo more >> by-root.txt 2>/dev/null || echo refused`);
        assert.equal(asUser.stdout, rootInside ? 'root user\nrefused\n' : 'user user\n');
        // Read where the sandbox's processes are counted: the host's cgroup, or the guest's in a VM.
        const [reading] = await sandbox.getMetrics();
        assert.ok(reading && reading.memUsed > 0 && reading.memTotal >= reading.memUsed && reading.diskTotal > 0, `metrics on ${kind}: ${JSON.stringify(reading)}`);
        let typed = '';
        const terminal = await sandbox.pty.create({ cols: 80, rows: 24, onData: (data) => void (typed += Buffer.from(data).toString()) });
        await sandbox.pty.sendInput(terminal.pid, Buffer.from('echo "on $(tty)"\n'));
        await waitUntil(() => /on \/dev\/pts\/\d+/.test(typed), 'a terminal of its own', { timeoutMs: 60_000, seen: () => typed });
        assert.equal(await sandbox.kill(), true);
        assert.equal(await sandbox.isRunning(), false);
      } finally {
        if (local !== server) await local.stop();
      }
    });
  }

  it("root inside a sandbox is no one on the host: a pooled uid, six capabilities that reach only the sandbox's own", async () => {
    const sandbox = await create();
    const marker = `root-marker-${randomBytes(4).toString('hex')}`;
    const asRoot = (command: string) => sandbox.commands.run(command, { user: 'root' }).catch((error: unknown) => error as CommandExitError);
    const sleeper = await sandbox.commands.run(`exec -a ${marker} sleep 600`, { user: 'root', background: true });
    const uid = hostUidOf(await hostPidNamed(marker));
    assert.ok(uid >= 64100 && uid < 64100 + 256, `root inside runs as a pooled host uid, not ${uid}`);
    const user = await sandbox.commands.run(`exec -a ${marker}-user sleep 600`, { background: true });
    assert.notEqual(hostUidOf(await hostPidNamed(`${marker}-user`)), uid, 'root and the user are two host uids');
    // Root's powers stop at the sandbox: no mount, no new namespace, no device; the system it
    // changes is its own copy (the host's /usr is untouched).
    const tried = await asRoot(
      `grep CapEff /proc/self/status; mount -t tmpfs x /tmp 2>&1 || echo no mount; unshare -U true 2>&1 || echo no userns; mknod /tmp/null c 1 3 2>&1 || echo no mknod; echo x > /usr/bin/${marker} && echo system write`,
    );
    assert.match(tried.stdout, /^CapEff:\s+00000000000000eb\n/);
    for (const said of ['no mount', 'no userns', 'no mknod', 'system write']) assert.ok(tried.stdout.includes(said), `${said}: ${tried.stdout}`);
    assert.equal(existsSync(`/usr/bin/${marker}`), false, "the sandbox's write to /usr is not the host's");
    // Nor can it take another process's descriptors (bwrap's init holds the agent's pipes).
    const pidfd = `import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); fd = libc.syscall(434, 1, 0); print(libc.syscall(438, fd, 0, 0), os.strerror(ctypes.get_errno()))`;
    assert.equal((await asRoot(`${PYTHON} -c '${pidfd}'`)).stdout, '-1 Operation not permitted\n');
    // The user holds no capability, not even inheritable ones, and cannot become root again.
    const plain = await sandbox.commands.run(`grep -E 'Cap(Inh|Eff)' /proc/self/status; ${PYTHON} -c 'import os; os.setuid(0)' 2>&1 | tail -1`);
    assert.match(plain.stdout, /^CapInh:\s+0000000000000000\nCapEff:\s+0000000000000000\nPermissionError/);
    // Root reads no profile the user wrote: its home is its own (/root, not the user's to write).
    await sandbox.commands.run(`echo 'touch /tmp/planted-by-user' >> ~/.bash_profile`);
    assert.equal((await asRoot('echo $HOME; test -e /tmp/planted-by-user && echo ran || echo not run')).stdout, '/root\nnot run\n');
    await Promise.all([sleeper.kill(), user.kill()]);
  });

  it("an API key's cap on running sandboxes: one more is refused (429), another key's is not; a kill frees its place", async () => {
    const as = (key: string) => ({ apiKey: key, apiUrl: server.url, sandboxUrl: server.url });
    const first = await Sandbox.create('base', as(API_KEYS.alice.key));
    created.push(first);
    await assert.rejects(Sandbox.create('base', as(API_KEYS.alice.key)), (error: unknown) => error instanceof RateLimitError && /alice holds 1 running/.test(error.message));
    created.push(await Sandbox.create('base', as(API_KEYS.bob.key)));
    await first.kill();
    const again = await Sandbox.create('base', as(API_KEYS.alice.key));
    created.push(again);
    await assert.rejects(Sandbox.connect(again.sandboxId, as(API_KEYS.bob.key)), SandboxNotFoundError);
  });

  it('commands: foreground, exit codes, background handles, stdin, connect, list and kill; metrics', async () => {
    const sandbox = await create({ envs: { FROM_CREATE: 'c' } });
    const failed = await sandbox.commands.run('echo out; echo err >&2; exit 3').catch((error: unknown) => error);
    assert.ok(failed instanceof CommandExitError, `a non-zero exit is CommandExitError, got ${String(failed)}`);
    assert.equal(failed.exitCode, 3);
    assert.equal(failed.stdout, 'out\n');
    assert.equal(failed.stderr, 'err\n');
    const envs = await sandbox.commands.run('echo $FROM_CREATE $FROM_RUN', { envs: { FROM_RUN: 'r' }, cwd: '/tmp' });
    assert.equal(envs.stdout, 'c r\n');
    const streamed: string[] = [];
    const background = await sandbox.commands.run('for i in 1 2 3; do echo line $i; sleep 0.1; done', { background: true, onStdout: (line) => void streamed.push(line) });
    const done = await background.wait();
    assert.equal(done.exitCode, 0);
    assert.equal(streamed.join(''), 'line 1\nline 2\nline 3\n');

    const cat = await sandbox.commands.run('cat', { background: true, stdin: true });
    await sandbox.commands.sendStdin(cat.pid, 'typed\n');
    await sandbox.commands.closeStdin(cat.pid);
    assert.equal((await cat.wait()).stdout, 'typed\n');

    const sleeper = await sandbox.commands.run('echo started; sleep 600', { background: true });
    const [reading] = await sandbox.getMetrics();
    assert.ok(reading && reading.memUsed > 0 && reading.memTotal >= reading.memUsed && reading.diskTotal > 0, `metrics from the sandbox's cgroup: ${JSON.stringify(reading)}`);
    const listed = await sandbox.commands.list();
    assert.ok(
      listed.some((process) => process.pid === sleeper.pid),
      `list shows the running command: ${JSON.stringify(listed)}`,
    );
    const second = await Sandbox.connect(sandbox.sandboxId, opts());
    const followed = await second.commands.connect(sleeper.pid);
    assert.equal(await second.commands.kill(sleeper.pid), true);
    const ended = await followed.wait().catch((error: unknown) => error);
    assert.ok(ended instanceof CommandExitError, 'a killed command ends with an error');
    assert.equal(await sandbox.commands.kill(sleeper.pid), false, 'killing it again finds nothing');
  });

  it('a command past its timeout is killed with its whole process tree', async () => {
    const sandbox = await create();
    const outcome = await sandbox.commands.run('sh -c "sleep 300 & setsid sleep 301 & wait"', { timeoutMs: 1500 }).catch((error: unknown) => error);
    assert.ok(outcome instanceof TimeoutError, `TimeoutError, got ${String(outcome)}`);
    await waitUntil(
      async () => (await sandbox.commands.run('ps -eo args')).stdout.split('\n').every((line) => !/^sleep 30[01]/.test(line)),
      'no sleep of the tree is left',
      30_000,
    );
  });

  it('pty: a terminal that echoes input, resizes and is killed', async () => {
    const sandbox = await create();
    let seen = '';
    const terminal = await sandbox.pty.create({ cols: 80, rows: 24, onData: (data) => void (seen += Buffer.from(data).toString()) });
    await sandbox.pty.sendInput(terminal.pid, Buffer.from('stty size; echo "tty: $(tty)"\n'));
    await waitUntil(() => /24 80/.test(seen) && /tty: \/dev\/pts\//.test(seen), 'the terminal answers', { timeoutMs: 30_000, seen: () => seen });
    await sandbox.pty.resize(terminal.pid, { cols: 100, rows: 40 });
    await sandbox.pty.sendInput(terminal.pid, Buffer.from('stty size\n'));
    await waitUntil(() => /40 100/.test(seen), 'the terminal has its new size', { timeoutMs: 30_000, seen: () => seen });
    assert.equal(await sandbox.pty.kill(terminal.pid), true);
  });

  it('files: write, read, list with depth, info, makeDir, rename, remove, watch, and a 50 MiB round trip', async () => {
    const sandbox = await create();
    const events: FilesystemEvent[] = [];
    await sandbox.files.makeDir('watched');
    const watch = await sandbox.files.watchDir('watched', (event) => void events.push(event), { recursive: true });
    await sandbox.files.write('watched/sub/a.txt', 'one');
    assert.equal(await sandbox.files.read('watched/sub/a.txt'), 'one');
    assert.deepEqual(
      (await sandbox.files.list('watched', { depth: 1 })).map((entry) => entry.name),
      ['sub'],
    );
    assert.deepEqual(
      (await sandbox.files.list('watched', { depth: 2 })).map((entry) => entry.path),
      ['/home/user/watched/sub', '/home/user/watched/sub/a.txt'],
    );
    assert.equal(await sandbox.files.makeDir('watched/sub'), false, 'makeDir of an existing directory');
    assert.equal((await sandbox.files.getInfo('watched/sub/a.txt')).size, 3);
    await sandbox.files.rename('watched/sub/a.txt', 'watched/sub/b.txt');
    assert.equal(await sandbox.files.exists('watched/sub/a.txt'), false);
    await sandbox.files.remove('watched/sub');
    await waitUntil(() => events.some((event) => event.name === 'sub' && event.type === 'remove'), 'the watch sees the removal', {
      timeoutMs: 30_000,
      seen: () => JSON.stringify(events),
    });
    assert.ok(
      events.some((event) => event.name === 'sub/a.txt' && event.type === 'create'),
      JSON.stringify(events),
    );
    assert.ok(
      events.some((event) => event.name === 'sub/a.txt' && event.type === 'rename'),
      JSON.stringify(events),
    );
    await watch.stop();
    await assert.rejects(sandbox.files.read('no/such/file'), FileNotFoundError);

    const big = randomBytes(50 * 1024 * 1024);
    await sandbox.files.write('big.bin', new Blob([big]));
    const back = Buffer.from(await sandbox.files.read('big.bin', { format: 'bytes' }));
    assert.equal(back.length, big.length);
    assert.ok(back.equals(big), 'the 50 MiB come back as they went');
  });

  it('files: metadata written with a file is kept with it (getInfo, list, rename); a write without clears it', async () => {
    const sandbox = await create();
    const metadata = { author: 'mish', purpose: 'upload' };
    assert.deepEqual((await sandbox.files.write('meta/a.txt', 'a', { metadata })).metadata, metadata);
    assert.deepEqual((await sandbox.files.getInfo('meta/a.txt')).metadata, metadata);
    const octet = await sandbox.files.write('meta/b.txt', 'b', { metadata, useOctetStream: true } as never);
    assert.deepEqual((octet as { metadata?: object }).metadata, metadata);
    assert.deepEqual((await sandbox.files.list('meta')).find((entry) => entry.name === 'a.txt')?.metadata, metadata);
    assert.deepEqual((await sandbox.files.rename('meta/a.txt', 'meta/c.txt')).metadata, metadata);
    assert.equal((await sandbox.files.write('meta/c.txt', 'again')).metadata, undefined);
    assert.equal((await sandbox.files.getInfo('meta/c.txt')).metadata, undefined);
    // Its files travel in the home's archive: their metadata with them.
    assert.equal(await sandbox.pause({ keepMemory: false }), true);
    assert.deepEqual((await (await sandbox.connect()).files.getInfo('meta/b.txt')).metadata, metadata);
  });

  it("sandboxes are apart: one's files and processes are never another's; unknown ids are not found; a host name routes", async () => {
    const [first, second] = [await create(), await create()];
    await first.files.write('secret.txt', 'first only');
    await first.commands.run('sleep 600', { background: true });
    assert.equal(await second.files.exists('secret.txt'), false);
    assert.deepEqual(await second.commands.list(), []);
    await assert.rejects(Sandbox.connect('0'.repeat(24), opts()), SandboxNotFoundError);
    // A wildcard DNS name in front of the service reaches a sandbox's envd by host name alone.
    assert.equal(await statusByHost(server.url, `49983-${first.sandboxId}.sandboxes.test`), 204);
    assert.equal(await statusByHost(server.url, `49983-${'0'.repeat(24)}.sandboxes.test`), 502, 'an unknown sandbox, as E2B answers it');
    assert.equal(await statusByHost(server.url, `3000-${first.sandboxId}.sandboxes.test`), 502, 'a port nothing serves');
    const health = await fetch(`${server.url}/health`);
    assert.equal(health.status, 200, 'the service stays healthy');
  });

  it("speaks the wire E2B's Python SDK uses: Connect with the binary protobuf codec, through the front door", async () => {
    // The Python SDK (connect-python) sends application/proto where the JS SDK sends JSON; no
    // Python E2B SDK is packaged for Debian, so its wire is driven here with connect-node's client.
    const made = await fetch(`${server.url}/v1/sandboxes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
      body: '{}',
    });
    const sandbox = (await made.json()) as { id: string; envd_access_token: string };
    try {
      const transport = createConnectTransport({
        baseUrl: server.url,
        httpVersion: '1.1',
        useBinaryFormat: true,
        interceptors: [
          (next) => (request) => {
            request.header.set('E2b-Sandbox-Id', sandbox.id);
            request.header.set('E2b-Sandbox-Port', '49983');
            request.header.set('X-Access-Token', sandbox.envd_access_token);
            return next(request);
          },
        ],
      });
      let stdout = '';
      let exitCode: number | undefined;
      for await (const { event } of createClient(Process, transport).start({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'echo binary > wire.txt; cat wire.txt'] } })) {
        if (event?.event.case === 'data' && event.event.value.output.case === 'stdout') stdout += Buffer.from(event.event.value.output.value).toString();
        if (event?.event.case === 'end') exitCode = event.event.value.exitCode;
      }
      assert.deepEqual({ stdout, exitCode }, { stdout: 'binary\n', exitCode: 0 });
      const { entries } = await createClient(Filesystem, transport).listDir({ path: '/home/user', depth: 1 });
      assert.deepEqual(
        entries.map((entry) => entry.name),
        ['wire.txt'],
      );
    } finally {
      await fetch(`${server.url}/v1/sandboxes/${sandbox.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${server.token}` } });
    }
  });

  it('setTimeout moves the end, an expired sandbox ends with its processes, and lists filter by metadata', async () => {
    const tag = randomBytes(4).toString('hex');
    const sandbox = await create({ metadata: { tag }, timeoutMs: 60_000 });
    // Listed while its end is still far off: a list after the short timeout could come too late on a loaded machine.
    const listed = await Sandbox.list({ ...opts(), query: { metadata: { tag } } }).nextItems();
    assert.deepEqual(
      listed.map((item) => item.sandboxId),
      [sandbox.sandboxId],
    );
    await sandbox.setTimeout(2000);
    await waitUntil(async () => !(await sandbox.isRunning()), 'the sandbox ends at its timeout', 30_000);
    assert.deepEqual(await Sandbox.list({ ...opts(), query: { metadata: { tag } } }).nextItems(), []);
  });

  it('lists newest first unless asked otherwise, by start time and template; knows its template names', async () => {
    const tag = randomBytes(4).toString('hex');
    const first = await create({ metadata: { tag } });
    const second = await create({ metadata: { tag } });
    const ids = async (options: Parameters<typeof Sandbox.list>[0] = {}) =>
      (await Sandbox.list({ ...opts(), ...options, query: { metadata: { tag }, ...options.query } }).nextItems()).map((item) => item.sandboxId);
    assert.deepEqual(await ids(), [second.sandboxId, first.sandboxId]);
    assert.deepEqual(await ids({ order: 'asc' }), [first.sandboxId, second.sandboxId]);
    const paged = Sandbox.list({ ...opts(), limit: 1, query: { metadata: { tag } } });
    assert.deepEqual(
      [...(await paged.nextItems()), ...(await paged.nextItems())].map((item) => item.sandboxId),
      [second.sandboxId, first.sandboxId],
    );
    const { startedAt } = await second.getInfo();
    assert.deepEqual(await ids({ query: { startedAfter: startedAt } }), [second.sandboxId]);
    assert.deepEqual(await ids({ query: { template: 'base' } }), [second.sandboxId, first.sandboxId]);
    assert.deepEqual(await ids({ query: { template: 'code-interpreter-v1' } }), []);
    assert.equal(await Template.exists('base', opts()), true);
    assert.equal(await Template.exists('code-interpreter-v1', opts()), true);
    assert.equal(await Template.exists(`absent-${tag}`, opts()), false);
  });

  it("a command's stream cut by its sandbox's kill says so, as E2B's SDK says it (a TimeoutError)", async () => {
    const sandbox = await create();
    const sleeper = await sandbox.commands.run('sleep 600', { background: true });
    await sandbox.kill();
    const ended = await sleeper.wait().catch((error: unknown) => error);
    assert.ok(ended instanceof TimeoutError && ended.message.includes('sandbox was killed or reached its end of life'), String(ended));
  });

  it("a sandbox has a boot id of its own, not the host's; paused with its files only, it comes back with a new one", async () => {
    const sandbox = await create();
    const bootId = async (running: Sandbox) => (await running.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim();
    const before = await bootId(sandbox);
    assert.notEqual(before, readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
    assert.equal(await sandbox.pause({ keepMemory: false }), true);
    const resumed = await sandbox.connect();
    assert.notEqual(await bootId(resumed), before);
  });

  it('a paused sandbox made with autoResume is resumed by a request to it; one without stays paused', async () => {
    const waking = await create({ lifecycle: { onTimeout: 'pause', autoResume: true } });
    await waking.files.write('kept.txt', 'kept');
    assert.equal(await waking.pause(), true);
    assert.equal((await waking.getInfo()).state, 'paused');
    assert.equal((await waking.commands.run('cat kept.txt')).stdout, 'kept');
    assert.deepEqual([(await waking.getInfo()).state, (await waking.getInfo()).lifecycle], ['running', { onTimeout: 'pause', autoResume: true }]);
    const sleeping = await create({ lifecycle: { onTimeout: 'pause' } });
    assert.equal(await sleeping.pause(), true);
    assert.equal(await sleeping.isRunning(), false);
    assert.equal((await sleeping.getInfo()).state, 'paused');
  });

  it("its root is its own to change, as on E2B's: files at /, root's home, the system; none of it the host's or another sandbox's", async () => {
    const [sandbox, other] = await Promise.all([create(), create()]);
    // The user writes where only root may make a directory: envd makes it, as root, for the user.
    const [written] = await sandbox.files.write([{ path: '/data/in/notes.txt', data: 'kept' }]);
    assert.equal(written?.path, '/data/in/notes.txt');
    assert.equal((await sandbox.commands.run('stat -c %U /data /data/in /data/in/notes.txt; cat /data/in/notes.txt')).stdout, 'user\nuser\nuser\nkept');
    // Root's relative paths and processes start in root's home.
    const [byRoot] = await sandbox.files.write([{ path: 'root-notes.txt', data: 'root' }], { user: 'root' });
    assert.equal(byRoot?.path, '/root/root-notes.txt');
    assert.equal((await sandbox.commands.run('pwd; ls', { user: 'root' })).stdout, '/root\nroot-notes.txt\n');
    // Root installs a tool into the system; it runs for the user, in this sandbox only.
    const tool = `tool-${randomBytes(4).toString('hex')}`;
    await sandbox.commands.run(`printf '#!/bin/sh\\necho installed\\n' > /usr/local/bin/${tool} && chmod 755 /usr/local/bin/${tool}`, { user: 'root' });
    assert.equal((await sandbox.commands.run(tool)).stdout, 'installed\n');
    assert.equal(existsSync(`/usr/local/bin/${tool}`), false, "the host's /usr is untouched");
    const elsewhere = await other.commands.run(`ls /usr/local/bin/${tool} /data 2>&1 || true`);
    assert.match(elsewhere.stdout, /No such file or directory[\s\S]*No such file or directory/);
    // What the system's copy holds is written on the sandbox's own disk, counted with its home.
    const before = (await sandbox.getMetrics())[0]!.diskUsed;
    await sandbox.commands.run('head -c 8M /dev/zero > /opt/filler', { user: 'root' });
    assert.ok((await sandbox.getMetrics())[0]!.diskUsed >= before + 8 * 2 ** 20, 'the 8 MiB at /opt count as its disk');
    await Promise.all([sandbox.kill(), other.kill()]);
  });

  it("sudo, as E2B's templates have it: the user runs a command as root, with sudo's environment, its input, output and exit status", async () => {
    const sandbox = await create();
    const run = (command: string) => sandbox.commands.run(command, { envs: { SECRET: 'kept-from-root' } }).catch((error: unknown) => error as CommandExitError);
    const asRoot = await run('sudo sh -c \'id -u; echo "${SECRET:-unset} $HOME $(pwd)"; touch /etc/by-sudo\'');
    assert.deepEqual([asRoot.exitCode, asRoot.stdout], [0, '0\nunset /root /home/user\n']);
    assert.equal((await run('stat -c %U /etc/by-sudo')).stdout, 'root\n');
    assert.equal((await run('echo piped | sudo cat')).stdout, 'piped\n');
    assert.equal((await run("sudo -E sh -c 'echo $SECRET'")).stdout, 'kept-from-root\n');
    assert.equal((await run('sudo sh -c "exit 7"')).exitCode, 7);
    assert.equal((await run('sudo -i pwd')).stdout, '/root\n');
    // sudo's signal reaches its command, which ends by it.
    assert.equal((await run('sudo sleep 30 & sleep 0.5; kill -TERM $!; wait $!; echo $?')).stdout, '143\n');
    await sandbox.kill();
  });

  it('a signed download or upload URL made against the service (E2B_SANDBOX_URL) reaches its sandbox, with no header', async () => {
    const sandbox = await create({ secure: true });
    const upload = await sandbox.uploadUrl('signed.txt', { useSignatureExpiration: 60_000 });
    const form = new FormData();
    form.append('file', new Blob(['signed content']), 'signed.txt');
    const uploaded = await fetch(upload, { method: 'POST', body: form });
    assert.equal(uploaded.status, 200);
    assert.equal(await (await fetch(await sandbox.downloadUrl('signed.txt'))).text(), 'signed content');
    const expired = await fetch(await sandbox.downloadUrl('signed.txt', { useSignatureExpiration: -10_000 }));
    assert.deepEqual([expired.status, await expired.json()], [401, { code: 401, message: 'signature is already expired' }]);
  });
});
