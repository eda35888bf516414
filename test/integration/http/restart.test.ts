import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { api, jobGate, startServer, waitForHealth, waitForStatus, waitTerminal } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';
import { hostProcessesMatching } from '../../helpers/processes.js';

describe('restart survival and draining', () => {
  it('survives SIGKILL with jobs in every state: results kept, running marked interrupted, queued run', async () => {
    const marker = `restart-${randomUUID().slice(0, 8)}`;
    const first = await startServer(['--concurrency', '1']);
    const done = await api(first.url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'finished before the crash'] } });
    await waitTerminal(first.url, done.json.job_id);
    const running = await api(first.url, 'POST', '/v1/jobs', { command: { argv: ['bash', '-c', `exec -a ${marker} sleep 120`] }, policy: { allow_shell: true } });
    await waitForStatus(first.url, running.json.job_id, 'running');
    // Running is the sandbox started: its bash may not have renamed itself yet, and a check for
    // the marker's absence would pass before it does (and the assertion below then saw it).
    await waitUntil(() => hostProcessesMatching(marker).length > 0, `the running job runs as ${marker}`);
    const queued = await api(first.url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'ran after the restart'] } });
    assert.equal((await api(first.url, 'GET', `/v1/jobs/${queued.json.job_id}`)).json.status, 'queued');

    first.child.kill('SIGKILL');
    await first.exited;
    // The sandbox dies with its supervisor (PDEATHSIG), even though no one cleaned up.
    await waitUntil(() => hostProcessesMatching(marker).length === 0, `no host process left of ${marker}`).catch(() => undefined);
    assert.deepEqual(hostProcessesMatching(marker), []);

    const second = await startServer(['--concurrency', '1'], { storeDir: first.storeDir });
    try {
      const kept = await api(second.url, 'GET', `/v1/jobs/${done.json.job_id}`);
      assert.equal(kept.json.status, 'completed');
      assert.equal(kept.json.result.stdout.text, 'finished before the crash\n');
      const interrupted = await api(second.url, 'GET', `/v1/jobs/${running.json.job_id}`);
      assert.equal(interrupted.json.status, 'failed');
      assert.equal(interrupted.json.result.error.code, 'run.interrupted');
      const resumed = await waitTerminal(second.url, queued.json.job_id);
      assert.equal(resumed.status, 'completed');
      assert.equal(resumed.result.stdout.text, 'ran after the restart\n');
      const status = JSON.parse(readFileSync(join(first.storeDir, 'runs', queued.json.job_id, 'status.json'), 'utf8'));
      assert.equal(status.status, 'completed');
      assert.ok(existsSync(join(first.storeDir, 'runs', queued.json.job_id, 'result.json')));
    } finally {
      await second.stop();
    }
  });

  it('drains on SIGTERM: refuses new jobs with queue.closed, finishes running ones, exits 0', async () => {
    // The running job ends when the gate opens, after the refusal: it cannot end (and the
    // server exit) before the refused request is sent, however slow the machine.
    const gate = await jobGate();
    const server = await startServer(['--concurrency', '1', '--grace-ms', '60000']);
    try {
      const running = await api(server.url, 'POST', '/v1/jobs', gate.job);
      await waitForStatus(server.url, running.json.job_id, 'running');
      server.child.kill('SIGTERM');
      // The queue closes as the signal is handled; /health says when, instead of a guessed sleep.
      await waitForHealth(server.url, (health) => health?.queue.accepting === false, 'the queue closes on SIGTERM');
      const refused = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] } });
      assert.equal(refused.status, 503);
      assert.equal(refused.json.error.code, 'queue.closed');
      gate.release();
      assert.equal(await server.exited, 0);
      const status = JSON.parse(readFileSync(join(server.storeDir, 'runs', running.json.job_id, 'status.json'), 'utf8'));
      assert.equal(status.status, 'completed');
    } finally {
      gate.release();
      await server.stop();
      await gate.close();
    }
  });

  it('cancels what is still running when the grace period ends', async () => {
    const server = await startServer(['--concurrency', '1', '--grace-ms', '300']);
    const running = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['sleep', '60'] } });
    await waitForStatus(server.url, running.json.job_id, 'running');
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0);
    const result = JSON.parse(readFileSync(join(server.storeDir, 'runs', running.json.job_id, 'result.json'), 'utf8'));
    assert.equal(result.status, 'canceled');
  });
});
