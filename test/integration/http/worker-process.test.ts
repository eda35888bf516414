import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { api, jobGate, startServer, waitForStatus, type JobGate, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
}

/** A process's command line; empty for one that ended since it was listed (a probe the front door ran). */
function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw error;
  }
}

function workerOf(frontDoor: number): number | undefined {
  return childrenOf(frontDoor).find((pid) => commandLine(pid).includes('worker-main'));
}

/** A one-slot server with a gated job running on it; both are cleaned up after `test`. */
async function withRunningJob(test: (server: ServerProcess, jobId: string, gate: JobGate) => Promise<void>): Promise<void> {
  const gate = await jobGate();
  const server = await startServer(['--concurrency', '1']);
  try {
    const running = await api(server.url, 'POST', '/v1/jobs', gate.job);
    await waitForStatus(server.url, running.json.job_id, 'running');
    await test(server, running.json.job_id, gate);
  } finally {
    gate.release();
    await server.stop();
    await gate.close();
  }
}

describe('the worker process beside the front door', () => {
  it('runs the sandboxes: while a job runs, the front door has no child but its worker', () =>
    withRunningJob(async (server, jobId, gate) => {
      const worker = workerOf(server.child.pid!);
      assert.ok(worker, 'the front door forked its worker');
      assert.deepEqual(childrenOf(server.child.pid!), [worker], 'no sandbox is a child of the front door');
      assert.ok(childrenOf(worker).length > 0, 'the sandbox is a child of the worker');
      gate.release();
      assert.equal((await api(server.url, 'GET', `/v1/jobs/${jobId}?wait=60`)).json.status, 'completed');
    }));

  it('hosts the sessions: while a session lives, the front door has no child but its worker', async () => {
    const server = await startServer(['--concurrency', '1']);
    try {
      const session = await api(server.url, 'POST', '/v1/sessions', { lang: 'python' });
      assert.equal(session.status, 201, session.text);
      assert.equal((await api(server.url, 'POST', `/v1/sessions/${session.json.id}/exec`, { code: 'x = 41' })).status, 200);
      const worker = workerOf(server.child.pid!);
      assert.ok(worker, 'the front door forked its worker');
      assert.deepEqual(childrenOf(server.child.pid!), [worker], 'the session sandbox is no child of the front door');
      assert.ok(childrenOf(worker).length > 0, 'the session sandbox is a child of the worker');
      assert.equal((await api(server.url, 'POST', `/v1/sessions/${session.json.id}/exec`, { code: 'x + 1' })).json.value, '42');
    } finally {
      await server.stop();
    }
  });

  it('a worker killed holding a session: the session answers session.lost or session.not_found, never hangs, and new sessions work', async () => {
    const server = await startServer(['--concurrency', '1']);
    try {
      const session = await api(server.url, 'POST', '/v1/sessions', {});
      assert.equal(session.status, 201, session.text);
      const first = workerOf(server.child.pid!)!;
      process.kill(first, 'SIGKILL');
      const gone = await api(server.url, 'GET', `/v1/sessions/${session.json.id}`);
      assert.ok((gone.status === 410 && gone.json.error.code === 'session.lost') || (gone.status === 404 && gone.json.error.code === 'session.not_found'), gone.text);
      await waitUntil(() => workerOf(server.child.pid!) !== undefined && workerOf(server.child.pid!) !== first, 'a new worker runs');
      const next = await api(server.url, 'POST', '/v1/sessions', {});
      assert.equal(next.status, 201, next.text);
    } finally {
      await server.stop();
    }
  });

  it('a worker killed mid-job loses nothing: the job ends run.interrupted, a new worker runs what follows', () =>
    withRunningJob(async (server, jobId) => {
      const queued = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'after the crash'] } });
      const first = workerOf(server.child.pid!)!;
      process.kill(first, 'SIGKILL');

      const interrupted = await api(server.url, 'GET', `/v1/jobs/${jobId}?wait=60`);
      assert.equal(interrupted.json.status, 'failed');
      assert.equal(interrupted.json.result.error.code, 'run.interrupted');
      const next = await api(server.url, 'GET', `/v1/jobs/${queued.json.job_id}?wait=60`);
      assert.equal(next.json.status, 'completed');
      assert.equal(next.json.result.stdout.text, 'after the crash\n');
      await waitUntil(() => workerOf(server.child.pid!) !== undefined, 'a new worker runs');
      assert.notEqual(workerOf(server.child.pid!), first);
      assert.equal((await api(server.url, 'GET', '/health')).status, 200);
    }));
});
