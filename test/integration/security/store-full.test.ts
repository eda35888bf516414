import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { api, jobGate, type JobGate, type ServerProcess, startServer, waitForHealth, waitForStatus } from '../../helpers/server.js';

/**
 * Security round 2, class 7 (exhaustion of the faces), its full-disk half: a full disk under
 * the run store crashed the service and left accepted jobs unreachable. Now, while the store
 * cannot take writes, a submission gets 503 store.unavailable with Retry-After and leaves
 * nothing behind; reads are served; /health says the store is degraded; a job already running
 * finishes, its record held in memory, and a queued one waits; when space returns the service
 * takes jobs again, runs the queued one and writes what it held, with no restart.
 *
 * The run store is a real 2 MiB tmpfs, filled by a file until ENOSPC: mounting needs root.
 */

const TERMINAL = ['completed', 'failed', 'timed_out', 'canceled', 'policy_denied', 'setup_failed', 'backend_unavailable'];

describe('a full disk under the run store', { skip: process.getuid?.() === 0 ? false : 'mounting a tmpfs needs root' }, () => {
  const storeDir = mkdtempSync(join(tmpdir(), 'store-full-'));
  const filler = join(storeDir, 'filler');
  let server: ServerProcess | undefined;
  let gate: JobGate | undefined;

  before(() => execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m,mode=0700', 'agent-runner-test-store', storeDir]));
  after(async () => {
    await server?.stop();
    await gate?.close();
    execFileSync('umount', [storeDir]);
    rmSync(storeDir, { recursive: true, force: true });
  });

  const runDir = (jobId: string) => join(storeDir, 'runs', jobId);
  const onDisk = (jobId: string, name: string) => JSON.parse(readFileSync(join(runDir(jobId), name), 'utf8'));

  it('refuses submissions with 503 store.unavailable, serves reads, keeps accepted jobs, and recovers when space returns', async () => {
    server = await startServer(['--concurrency', '1'], { storeDir });
    gate = await jobGate();
    const { url } = server;

    const earlier = await api(url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'before the disk filled'] } });
    assert.equal(earlier.status, 202, earlier.text);
    assert.equal((await api(url, 'GET', `/v1/jobs/${earlier.json.job_id}?wait=60`)).json.status, 'completed');
    // Accepted before the disk fills: one running (held by the gate), one queued behind it.
    const running = await api(url, 'POST', '/v1/jobs', gate.job);
    assert.equal(running.status, 202, running.text);
    await waitForStatus(url, running.json.job_id, 'running');
    const queued = await api(url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'queued before the disk filled'] } });
    assert.equal(queued.status, 202, queued.text);
    const accepted = [earlier.json.job_id, running.json.job_id, queued.json.job_id] as string[];

    assert.throws(() => writeFileSync(filler, Buffer.alloc(4 * 1024 * 1024)), { code: 'ENOSPC' });

    const refused = await api(url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'while full'] } });
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.json.error.code, 'store.unavailable');
    assert.equal(refused.json.error.details.reason, 'ENOSPC');
    assert.ok(Number(refused.headers.get('retry-after')) > 0, 'Retry-After');
    assert.deepEqual(readdirSync(join(storeDir, 'runs')).sort(), [...accepted].sort(), 'a refused job leaves no run dir or temp file');

    const read = await api(url, 'GET', `/v1/jobs/${earlier.json.job_id}`);
    assert.equal(read.status, 200);
    assert.equal(read.json.result.stdout.text, 'before the disk filled\n');
    assert.equal((await api(url, 'GET', '/v1/jobs?limit=10')).json.jobs.length, 3);
    const degraded = await api(url, 'GET', '/health');
    assert.equal(degraded.status, 200);
    assert.equal(degraded.json.status, 'degraded');
    assert.equal(degraded.json.store.writable, false);
    assert.equal(degraded.json.store.error, 'ENOSPC');

    // The running job ends while the disk is full: reachable, its record held in memory. The
    // queued one is not started: it could keep no logs; it waits for space.
    gate.release();
    const ended = await api(url, 'GET', `/v1/jobs/${running.json.job_id}?wait=60`);
    assert.ok(TERMINAL.includes(ended.json.status), ended.json.status);
    assert.equal(ended.json.result.job_id, running.json.job_id);
    assert.ok(!existsSync(join(runDir(running.json.job_id), 'result.json')), 'not on disk yet');
    assert.equal((await api(url, 'GET', '/health')).json.store.held_jobs, 1);
    assert.equal((await api(url, 'GET', `/v1/jobs/${queued.json.job_id}`)).json.status, 'queued');

    rmSync(filler);
    const resumed = await api(url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'space is back'] } });
    assert.equal(resumed.status, 202, resumed.text);
    const done = await api(url, 'GET', `/v1/jobs/${resumed.json.job_id}?wait=60`);
    assert.equal(done.json.status, 'completed', JSON.stringify(done.json.result?.error));
    assert.equal(done.json.result.stdout.text, 'space is back\n');
    const waited = await api(url, 'GET', `/v1/jobs/${queued.json.job_id}?wait=60`);
    assert.equal(waited.json.status, 'completed', JSON.stringify(waited.json.result?.error));
    assert.equal(waited.json.result.stdout.text, 'queued before the disk filled\n');

    await waitForHealth(url, (health) => health.status === 'ok', 'the held records are written and the store is healthy');
    for (const jobId of [running.json.job_id, queued.json.job_id] as string[]) {
      const served = (await api(url, 'GET', `/v1/jobs/${jobId}`)).json;
      assert.deepEqual(onDisk(jobId, 'result.json'), served.result);
      assert.equal(onDisk(jobId, 'status.json').status, served.status);
    }
  });
});
