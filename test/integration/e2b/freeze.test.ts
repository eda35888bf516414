import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Sandbox } from 'e2b';
import { hostProcessesMatching } from '../../helpers/processes.js';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

/** The freezer state (cgroup v1 `freezer.state`, v2 `frozen` in cgroup.events) of the group a host process is in. */
function freezerState(pid: string): 'FROZEN' | 'THAWED' | 'other' {
  const groups = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  const v1 = groups.find((line) => line.split(':')[1] === 'freezer')?.split(':')[2];
  if (v1 !== undefined) {
    const state = readFileSync(`/sys/fs/cgroup/freezer${v1}/freezer.state`, 'utf8').trim();
    return state === 'FROZEN' || state === 'THAWED' ? state : 'other';
  }
  const v2 = groups.find((line) => line.startsWith('0::'))!.slice(3);
  return /^frozen 1$/m.test(readFileSync(`/sys/fs/cgroup${v2}/cgroup.events`, 'utf8')) ? 'FROZEN' : 'THAWED';
}

const PORT_SERVER = readFileSync(new URL('../../fixtures/ports/port_server.py', import.meta.url), 'utf8');

/** A GET of / on a sandbox's port through the service. */
function get(server: ServerProcess, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    request({ hostname, port, path: '/', headers }, (answer) => {
      let body = '';
      answer.setEncoding('utf8');
      answer.on('data', (chunk: string) => (body += chunk));
      answer.on('end', () => resolve({ status: answer.statusCode ?? 0, body }));
    })
      .on('error', reject)
      .end();
  });
}

/** A sandbox running `sleep <marker>`, which no client follows, and the sleeper's host pid. */
async function withSleeper(create: () => Promise<Sandbox>): Promise<{ sandbox: Sandbox; marker: string; pid: string }> {
  const sandbox = await create();
  const marker = `4343.${Math.floor(Math.random() * 1e6)}`;
  await (await sandbox.commands.run(`sleep ${marker}`, { background: true })).disconnect();
  let pid = '';
  await waitUntil(() => (pid = hostProcessesMatching(`sleep ${marker}`)[0]?.split(' ')[0] ?? '') !== '', 'the sleeper runs on the host');
  return { sandbox, marker, pid };
}

describe('idle sandboxes frozen and thawed by their next request (sandboxes.freezeIdleSeconds)', () => {
  let server: ServerProcess;
  const opts = () => ({ apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });

  before(async () => {
    server = await startServer([], { env: { AGENT_RUNNER_SANDBOXES__FREEZE_IDLE_SECONDS: '1' } });
  });
  after(async () => {
    await server.stop();
  });

  it('an idle sandbox is frozen whole; a request thaws it first and is answered, its processes going on where they were', async () => {
    const { sandbox, pid } = await withSleeper(() => Sandbox.create('base', opts()));
    await sandbox.files.write('kept.txt', 'before the freeze');
    await waitUntil(() => freezerState(pid) === 'FROZEN', 'the idle sandbox is frozen');
    // Its state is still running: the freeze is the host's affair, not the sandbox's.
    assert.equal((await Sandbox.getInfo(sandbox.sandboxId, opts())).state, 'running');
    assert.equal((await sandbox.commands.run('echo hi; cat kept.txt')).stdout, 'hi\nbefore the freeze');
    // Frozen again once idle again, and thawed again by a file read.
    await waitUntil(() => freezerState(pid) === 'FROZEN', 'the sandbox, idle again, is frozen again');
    assert.equal(await sandbox.files.read('kept.txt'), 'before the freeze');
    const metrics = await api(server.url, 'GET', '/metrics');
    const thawed = /agent_runner_sandbox_freezes_total\{backend="local_process",event="thawed"[^}]*\} (\d+)/.exec(metrics.text);
    assert.ok(Number(thawed?.[1]) >= 2, `thawed twice at least: ${thawed?.[0]}`);
    await sandbox.kill();
  });

  it('a command a client waits on is never frozen, however long it sleeps', async () => {
    const sandbox = await Sandbox.create('base', opts());
    // Three idle periods of sleeping with its output followed: frozen, it would never say done.
    assert.equal((await sandbox.commands.run('sleep 3; echo done')).stdout, 'done\n');
    await sandbox.kill();
  });

  it('a sandbox whose process works is not frozen while an idle one beside it is', async () => {
    const busy = await Sandbox.create('base', opts());
    const spinner = `spin${Math.floor(Math.random() * 1e6)}`;
    await (await busy.commands.run(`exec -a ${spinner} sh -c 'while :; do :; done'`, { background: true })).disconnect();
    let busyPid = '';
    await waitUntil(() => (busyPid = hostProcessesMatching(spinner)[0]?.split(' ')[0] ?? '') !== '', 'the spinner runs on the host');
    // The idle one is the clock: by the time it is frozen, the busy one was looked at as long.
    const idle = await withSleeper(() => Sandbox.create('base', opts()));
    await waitUntil(() => freezerState(idle.pid) === 'FROZEN', 'the idle sandbox is frozen');
    assert.equal(freezerState(busyPid), 'THAWED', 'a sandbox using CPU is not idle');
    await Promise.all([busy.kill(), idle.sandbox.kill()]);
  });

  it('a request to a port thaws a frozen sandbox first; a connection open to its port keeps it from being frozen; a pause ends that connection', async () => {
    const { sandbox, pid } = await withSleeper(() => Sandbox.create('base', opts()));
    await sandbox.files.write('port_server.py', PORT_SERVER);
    await (await sandbox.commands.run('python3 port_server.py 8000', { background: true })).disconnect();
    const byName = { host: sandbox.getHost(8000) };
    await waitUntil(async () => (await get(server, byName)).status === 200, 'the server in the sandbox answers');
    await waitUntil(() => freezerState(pid) === 'FROZEN', 'the idle sandbox is frozen');
    assert.deepEqual(await get(server, byName), { status: 200, body: 'hello from the sandbox\n' });

    // An upload held open: its connection to the server is open all the while.
    const { hostname, port } = new URL(server.url);
    const upload = request({ hostname, port, path: '/sha256', method: 'POST', headers: { ...byName, 'transfer-encoding': 'chunked' } });
    const answered = new Promise<string>((resolve, reject) => {
      upload.on('response', (answer) => {
        let body = '';
        answer.setEncoding('utf8');
        answer.on('data', (chunk: string) => (body += chunk));
        answer.on('end', () => resolve(body));
      });
      upload.on('error', reject);
    });
    upload.write('a');
    // The idle one is the clock: by the time it is frozen, the connected one was looked at as long.
    const idle = await withSleeper(() => Sandbox.create('base', opts()));
    await waitUntil(() => freezerState(idle.pid) === 'FROZEN', 'the idle sandbox is frozen');
    assert.equal(freezerState(pid), 'THAWED', 'a sandbox with a connection open to its port is not idle');
    upload.end('b');
    assert.equal(await answered, `${createHash('sha256').update('ab').digest('hex')} 2`);

    // A pause with a connection open (a request under way) ends the connection, and resumed the port answers again.
    const held = request({ hostname, port, path: '/sha256', method: 'POST', headers: { ...byName, 'transfer-encoding': 'chunked' } });
    const heldEnded = new Promise<void>((resolve) => {
      held.on('error', () => resolve());
      held.on('response', (answer) =>
        answer
          .resume()
          .on('end', resolve)
          .on('error', () => resolve()),
      );
    });
    held.write('a');
    // Its server has the connection (an established TCP connection to port 8000, 1F40, state 01).
    const established = async () =>
      (await sandbox.commands.run('cat /proc/net/tcp /proc/net/tcp6')).stdout.split('\n').some((line) => / [0-9A-F]+:1F40 [0-9A-F]+:[0-9A-F]+ 01 /.test(line));
    await waitUntil(established, 'the held request is connected to the server');
    assert.equal(await sandbox.pause(), true);
    await heldEnded;
    const resumed = await Sandbox.connect(sandbox.sandboxId, opts());
    await waitUntil(async () => (await get(server, byName)).status === 200, "the resumed sandbox's server answers");
    await Promise.all([resumed.kill(), idle.sandbox.kill()]);
  });

  it('a frozen sandbox is killed, paused and resumed as a running one: nothing of it is left stopped on the host', async () => {
    const killed = await withSleeper(() => Sandbox.create('base', opts()));
    await waitUntil(() => freezerState(killed.pid) === 'FROZEN', 'the sandbox to kill is frozen');
    await killed.sandbox.kill();
    assert.deepEqual(hostProcessesMatching(`sleep ${killed.marker}`), [], 'a frozen process dies with its sandbox');

    const paused = await withSleeper(() => Sandbox.create('base', opts()));
    await paused.sandbox.files.write('kept.txt', 'frozen, then paused');
    await waitUntil(() => freezerState(paused.pid) === 'FROZEN', 'the sandbox to pause is frozen');
    assert.equal(await paused.sandbox.pause(), true);
    assert.deepEqual(hostProcessesMatching(`sleep ${paused.marker}`), []);
    const resumed = await Sandbox.connect(paused.sandbox.sandboxId, opts());
    assert.equal(await resumed.files.read('kept.txt'), 'frozen, then paused');
    await resumed.kill();
  });
});
