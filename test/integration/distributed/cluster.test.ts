import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Sandbox, SandboxNotFoundError } from 'e2b';
import pg from 'pg';
import WebSocket from 'ws';
import { contractError } from '../../../src/contract/errors.js';
import { AgentRunnerClient, type JobEvent } from '../../../src/client/index.js';
import { Cluster } from '../../../src/postgres/cluster.js';
import { unrunResult } from '../../../src/runner/run-job.js';
import { cursorOf } from '../../../src/jobs/job-cursor.js';
import { startWorker, type WorkerProcessHandle } from '../../helpers/cluster.js';
import { startPostgres, type ThrowawayPostgres } from '../../helpers/postgres.js';
import { testRuntime } from '../../helpers/runtime.js';
import { api, type ServerProcess, startServer, waitForHealth, waitForStatus } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

const sleepJob = (seconds: number, id?: string) => ({ ...(id ? { job_id: id } : {}), command: { argv: ['/usr/bin/sleep', String(seconds)] } });

describe('the distributed mode on PostgreSQL', () => {
  let database: ThrowawayPostgres;
  const servers: ServerProcess[] = [];
  const workers: WorkerProcessHandle[] = [];
  const frontDoor = () => startServer(['--database', database.url, '--workers', '0']).then((server) => (servers.push(server), server));
  const worker = (concurrency: number) => startWorker(database.url, concurrency).then((handle) => (workers.push(handle), handle));

  before(() => {
    database = startPostgres();
  });
  after(async () => {
    await Promise.all([...workers.map((handle) => handle.stop()), ...servers.map((server) => server.stop())]);
    database.destroy();
  });

  test('a late result from a worker presumed dead is discarded: one result per job', async () => {
    const cluster = new Cluster(database.url, testRuntime(), { applicationName: 'test' });
    await cluster.open();
    try {
      const { runs, db, queue } = cluster;
      await db.transaction(async (client) =>
        runs.insert(client, {
          jobId: 'fenced',
          traceId: undefined,
          backend: 'local_process',
          request: {},
          payload: { command: { argv: ['true'] } },
          queueJobId: await queue.send(client, 'fenced'),
        }),
      );
      const first = await db.transaction((client) => runs.claim(client, 'fenced', 'worker-a'));
      assert.equal(first?.attempt, 1);
      assert.deepEqual(first?.request, { command: { argv: ['true'] } });
      // worker-a falls silent: its job goes back and worker-b takes it.
      await db.transaction((client) => runs.giveBack(client, ['worker-a']));
      const second = await db.transaction((client) => runs.claim(client, 'fenced', 'worker-b'));
      assert.equal(second?.attempt, 2);
      const result = (status: 'completed' | 'failed') =>
        unrunResult({ job_id: 'fenced', command: { argv: ['true'] } }, status, contractError('run.interrupted', 'test'), cluster.runtime);
      assert.equal(await runs.finish('fenced', 1, 'worker-a', result('failed'), []), false, 'the superseded attempt is refused');
      assert.equal(await runs.finish('fenced', 2, 'worker-b', result('completed'), []), true);
      assert.equal(await runs.finish('fenced', 2, 'worker-b', result('completed'), []), false, 'a job has one result');
      const state = await runs.get('fenced');
      assert.equal(state?.status, 'completed');
      assert.equal(state?.attempt, 2);
      const { rows } = await db.query<{ attempt: number; outcome: string }>('SELECT attempt, outcome FROM agent_runner.attempts WHERE job_id = $1 ORDER BY attempt', ['fenced']);
      assert.deepEqual(rows, [
        { attempt: 1, outcome: 'discarded' },
        { attempt: 2, outcome: 'result' },
      ]);
      assert.equal(await runs.request('fenced').then((request) => JSON.stringify(request)), '{}', 'the payload (env values) is gone once the job ended');
    } finally {
      await cluster.close();
    }
  });

  test('a job for a kind no live worker offers is refused at admission with backend.unavailable', async () => {
    const door = await frontDoor();
    const refused = await api(door.url, 'POST', '/v1/jobs', sleepJob(0));
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.json.error.code, 'backend.unavailable');
    assert.match(refused.json.error.message, /no worker is alive/);
  });

  test('a listing cursor that names no job, or is malformed, is 400 validation.invalid_cursor; a known one pages on', async () => {
    const door = servers[0] ?? (await frontDoor());
    for (const cursor of ['not-a-cursor!', cursorOf('job_that_never_was')]) {
      const listed = await api(door.url, 'GET', `/v1/jobs?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(listed.status, 400, `cursor ${cursor}: ${listed.text}`);
      assert.equal(listed.json.error.code, 'validation.invalid_cursor');
    }
    // The job the first test wrote: the oldest there is, so nothing comes after it.
    const after = await api(door.url, 'GET', `/v1/jobs?cursor=${cursorOf('fenced')}`);
    assert.equal(after.status, 200, after.text);
    assert.deepEqual(after.json, { jobs: [], next_cursor: null });
  });

  test('2 front doors, 3 workers, 200 jobs; a worker and a front door killed with -9 mid-run: every job ends with exactly one result', async () => {
    const [doorA, doorB] = [servers[0] ?? (await frontDoor()), await frontDoor()];
    const [doomedWorker] = await Promise.all([worker(2), worker(2), worker(2)]);
    await waitUntil(async () => (await api(doorA.url, 'POST', '/v1/jobs', sleepJob(0, 'warm-up'))).status === 202, 'the front door sees live workers');
    const ids = Array.from({ length: 200 }, (_, index) => `bulk-${index}`);
    for (const [index, id] of ids.entries()) {
      const door = index % 2 === 0 ? doorA : doorB;
      const accepted = await api(door.url, 'POST', '/v1/jobs', sleepJob(0.2, id));
      assert.equal(accepted.status, 202, accepted.text);
    }
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const held = async (workerId: string) => Number((await client.query('SELECT count(*) FROM agent_runner.runs WHERE worker_id = $1', [workerId])).rows[0].count);
      await waitUntil(async () => (await held(doomedWorker!.workerId)) > 0, 'the doomed worker holds jobs');
      doomedWorker!.child.kill('SIGKILL');
      doorA.child.kill('SIGKILL');
      await Promise.all([doomedWorker!.exited, doorA.exited]);
      await waitUntil(
        async () => Number((await client.query(`SELECT count(*) FROM agent_runner.runs WHERE job_id LIKE 'bulk-%' AND status IN ('queued', 'running')`)).rows[0].count) === 0,
        'every job has ended',
        120_000,
      );
      const { rows } = await client.query<{ job_id: string; status: string; attempt: number; results: string }>(
        `SELECT r.job_id, r.status, r.attempt, (SELECT count(*) FROM agent_runner.attempts a WHERE a.job_id = r.job_id AND a.outcome = 'result') AS results
         FROM agent_runner.runs r WHERE r.job_id LIKE 'bulk-%'`,
      );
      assert.equal(rows.length, 200);
      assert.deepEqual(
        rows.filter((row) => row.status !== 'completed' || Number(row.results) !== 1),
        [],
        'every job completed, with exactly one stored result',
      );
      assert.ok(
        rows.some((row) => row.attempt >= 2),
        'the killed worker’s jobs ran again elsewhere',
      );
      // The surviving front door answers for jobs the dead one accepted.
      const state = await api(doorB.url, 'GET', '/v1/jobs/bulk-0');
      assert.equal(state.json.status, 'completed');
      assert.equal(state.json.result.status, 'completed');
    } finally {
      await client.end();
    }
  });

  test('cancel reaches the worker running the job', async () => {
    const door = servers.at(-1)!;
    const accepted = await api(door.url, 'POST', '/v1/jobs', sleepJob(60));
    assert.equal(accepted.status, 202, accepted.text);
    await waitForStatus(door.url, accepted.json.job_id, 'running');
    const canceled = await api(door.url, 'POST', `/v1/jobs/${accepted.json.job_id}/cancel`);
    assert.equal(canceled.json.status, 'canceled', canceled.text);
    const state = await api(door.url, 'GET', `/v1/jobs/${accepted.json.job_id}`);
    assert.equal(state.json.result.error.code, 'run.canceled');
    assert.ok(state.json.result.duration_ms < 60_000);
  });

  test('a job on a worker streams its output to a follower on a front door, and its artifact is served from the database', async () => {
    const door = servers.at(-1)!;
    const client = new AgentRunnerClient({ url: door.url, token: door.token! });
    const { job_id } = await client.run({
      policy: { allow_shell: true },
      command: { argv: ['/usr/bin/python3', '-u', '-c', 'import time\nopen("out.txt", "w").write("made on a worker")\nprint("ready")\ntime.sleep(60)'] },
      artifacts: ['out.txt'],
    });
    const seen: JobEvent[] = [];
    for await (const event of client.events(job_id)) {
      seen.push(event);
      // Only a live stream shows it: the job sleeps for a minute after.
      if (event.event === 'stdout') await client.cancel(job_id);
    }
    const streamed = seen
      .filter((event) => event.event === 'stdout')
      .map((event) => (event.data as { text: string }).text)
      .join('');
    assert.equal(streamed, 'ready\n');
    assert.equal(seen.at(-1)!.event, 'end');
    const db = new pg.Client({ connectionString: database.url });
    await db.connect();
    try {
      const { rows } = await db.query('SELECT count(*)::int AS left FROM agent_runner.output WHERE job_id = $1', [job_id]);
      assert.deepEqual(rows, [{ left: 0 }], 'the live output goes with the result');
    } finally {
      await db.end();
    }
    const [artifact] = await client.artifacts(job_id);
    assert.equal(artifact?.path, 'out.txt');
    assert.equal((await client.artifact(job_id, 'out.txt')).toString(), 'made on a worker');
  });

  test('the database going away: 503 store.unavailable, then it recovers by itself', async () => {
    const door = servers.at(-1)!;
    database.stop();
    try {
      const read = await api(door.url, 'GET', '/v1/jobs/bulk-0');
      assert.equal(read.status, 503, read.text);
      assert.equal(read.json.error.code, 'store.unavailable');
      const submit = await api(door.url, 'POST', '/v1/jobs', sleepJob(0));
      assert.equal(submit.status, 503, submit.text);
      assert.equal(submit.json.error.code, 'store.unavailable');
      await waitForHealth(door.url, (health) => health.status === 'degraded', 'health says degraded');
    } finally {
      // Back for the tests after this one, whatever happened here.
      database.start();
    }
    let accepted: Awaited<ReturnType<typeof api>> | undefined;
    await waitUntil(async () => (accepted = await api(door.url, 'POST', '/v1/jobs', sleepJob(0))).status === 202, 'the front door takes jobs again');
    const ended = await api(door.url, 'GET', `/v1/jobs/${accepted!.json.job_id}?wait=60`);
    assert.equal(ended.json.status, 'completed', ended.text);
    assert.equal((await api(door.url, 'GET', '/health')).json.status, 'ok');
  });

  test('a session made through one front door is used through another; when its front door stops, the others answer 410 session.lost', async () => {
    // The front doors of one cluster share their token: they forward a session's calls with it.
    const token = randomBytes(16).toString('hex');
    const auth = { authorization: `Bearer ${token}` };
    // In `servers` as soon as each listens, so that after() stops both whatever happens here.
    const [maker, other] = await Promise.all(
      [0, 1].map(() => startServer(['--database', database.url, '--workers', '0', '--token', token]).then((server) => (servers.push(server), server))),
    );
    const made = await api(maker!.url, 'POST', '/v1/sessions', { lang: 'python' }, auth);
    assert.equal(made.status, 201, made.text);
    const path = `/v1/sessions/${made.json.id}`;
    assert.equal((await api(other!.url, 'POST', `${path}/exec`, { code: 'x = 41' }, auth)).status, 200);
    assert.equal((await api(maker!.url, 'POST', `${path}/exec`, { code: 'x + 1' }, auth)).json.value, '42');
    const written = await fetch(`${other!.url}${path}/files/notes.txt`, {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/octet-stream' },
      body: 'from the other door',
    });
    assert.equal(written.status, 201, await written.text());
    assert.equal(await (await fetch(`${maker!.url}${path}/files/notes.txt`, { headers: auth })).text(), 'from the other door');
    const missing = await api(other!.url, 'GET', `${path}/files/absent.txt`, undefined, auth);
    assert.equal(missing.status, 404, missing.text);
    assert.equal(missing.json.error.code, 'session.file_not_found', 'the owner’s error crosses as it is');
    assert.equal((await api(other!.url, 'GET', path, undefined, auth)).json.state, 'running');

    await maker!.stop();
    const lost = await api(other!.url, 'POST', `${path}/exec`, { code: 'x' }, auth);
    assert.equal(lost.status, 410, lost.text);
    assert.equal(lost.json.error.code, 'session.lost');
    const unknown = await api(other!.url, 'GET', `/v1/sessions/ses_${'0'.repeat(32)}`, undefined, auth);
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(unknown.json.error.code, 'session.not_found');
  });

  test("an E2B sandbox made through one front door is driven through another: its routes and its envd's streams reach the front door that holds it; when that one stops, the sandbox is lost", async () => {
    const token = randomBytes(16).toString('hex');
    const [maker, other] = await Promise.all(
      [0, 1].map(() => startServer(['--database', database.url, '--workers', '0', '--token', token]).then((server) => (servers.push(server), server))),
    );
    const through = (server: ServerProcess) => ({ apiKey: token, apiUrl: server.url, sandboxUrl: server.url });
    const sandbox = await Sandbox.create('base', through(maker!));
    const elsewhere = await Sandbox.connect(sandbox.sandboxId, through(other!));
    assert.equal((await elsewhere.commands.run('echo from the other door > note.txt && cat note.txt')).stdout, 'from the other door\n');
    assert.equal(await sandbox.files.read('note.txt'), 'from the other door\n');
    // A port of it too, a request and a WebSocket: the other door passes both to the door that holds it.
    await sandbox.files.write('port_server.py', readFileSync(new URL('../../fixtures/ports/port_server.py', import.meta.url), 'utf8'));
    await (await sandbox.commands.run('python3 port_server.py 8000', { background: true })).disconnect();
    const byName = { host: sandbox.getHost(8000) };
    const hostSeen = (path = '/host') =>
      new Promise<string>((resolve, reject) => {
        const { hostname, port } = new URL(other!.url);
        request({ hostname, port, path, headers: byName }, (answer) => {
          let body = '';
          answer.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
          answer.on('end', () => resolve(`${answer.statusCode} ${body}`));
        })
          .on('error', reject)
          .end();
      });
    await waitUntil(async () => (await hostSeen()) === `200 ${byName.host}`, "the sandbox's port answers through the other front door");
    // What the front doors and the worker say among themselves is not passed on to its server.
    const headers = (await hostSeen('/headers')).split('\n');
    assert.ok(!headers.some((name) => name.startsWith('e2b-') || name === 'x-agent-runner-forwarded'), headers.join(' '));
    const socket = new WebSocket(`${other!.url.replace('http', 'ws')}/ws`, { headers: byName });
    const echoed = await new Promise<string>((resolve, reject) => {
      socket.once('open', () => socket.send('through the other door')).once('error', reject);
      socket.once('message', (data: Buffer) => resolve(data.toString('utf8')));
    });
    assert.equal(echoed, 'through the other door');
    socket.close();
    assert.equal((await Sandbox.getInfo(sandbox.sandboxId, through(other!))).state, 'running');
    // A listing through either front door shows the sandboxes of both.
    const beside = await Sandbox.create('base', through(other!));
    for (const door of [maker!, other!]) {
      const listed = (await Sandbox.list(through(door)).nextItems()).map((each) => each.sandboxId).sort();
      assert.deepEqual(listed, [sandbox.sandboxId, beside.sandboxId].sort(), `listed through ${door.url}`);
      const ours = await api(door.url, 'GET', '/v1/sandboxes', undefined, { authorization: `Bearer ${token}` });
      assert.deepEqual(ours.json.sandboxes.map((each: { id: string }) => each.id).sort(), [sandbox.sandboxId, beside.sandboxId].sort());
    }
    await beside.kill();
    assert.equal(await Sandbox.kill(sandbox.sandboxId, through(other!)), true);
    assert.equal(await sandbox.isRunning(), false);

    // Its front door stops: the sandbox went with it, and the others say so in each route's dialect.
    const orphan = await Sandbox.create('base', through(maker!));
    await maker!.stop();
    await assert.rejects(Sandbox.getInfo(orphan.sandboxId, through(other!)), SandboxNotFoundError);
    const lost = await api(other!.url, 'GET', `/v1/sandboxes/${orphan.sandboxId}`, undefined, { authorization: `Bearer ${token}` });
    assert.equal(lost.status, 410, lost.text);
    assert.equal(lost.json.error.code, 'sandbox.lost');
    assert.equal(
      await Sandbox.connect(orphan.sandboxId, through(other!)).then(
        (connected) => connected.isRunning(),
        () => false,
      ),
      false,
    );
  });
});
