import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { startWorker, type WorkerProcessHandle } from '../../helpers/cluster.js';
import { startPostgres, type ThrowawayPostgres } from '../../helpers/postgres.js';
import { api, type ServerProcess, startServer, waitTerminal } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

const trueJob = (kind: string) => ({ command: { argv: ['true'] }, backend: { kind }, limits: { timeout_ms: 120_000 } });

describe('a worker on a machine where the microVM backend was never prepared', () => {
  let database: ThrowawayPostgres;
  let door: ServerProcess | undefined;
  let worker: WorkerProcessHandle | undefined;
  const stateDir = mkdtempSync(join(tmpdir(), 'first-use-worker-'));
  chmodSync(stateDir, 0o755);

  before(() => {
    database = startPostgres();
  });
  after(async () => {
    await Promise.all([worker?.stop(), door?.stop()]);
    database.destroy();
    rmSync(stateDir, { recursive: true, force: true });
  });

  test('joins with the kinds ready at once, takes their jobs, and offers microvm once its guest image is built', { timeout: 20 * 60_000 }, async () => {
    door = await startServer(['--database', database.url, '--workers', '0']);
    // Its microVM cache is empty: the guest image is built from scratch while the worker runs.
    // Without a warm pool its microvm job boots cold, sparing the suite a snapshot (40 s of a VM
    // under emulation) that is not what this test is about.
    worker = await startWorker(database.url, 2, {
      AGENT_RUNNER_STATE_DIR: stateDir,
      AGENT_RUNNER_BACKENDS__MICROVM__CACHE_DIR: join(stateDir, 'microvm-cache'),
      AGENT_RUNNER_BACKENDS__MICROVM__WARM_POOL_SIZE: '0',
    });
    const joined = worker.logs
      .map((line) => JSON.parse(line) as { msg: string; kinds?: string[]; preparing?: string[] })
      .find((entry) => entry.msg === 'worker joined the cluster');
    assert.ok(joined, worker.logs.join('\n'));
    assert.ok(joined.kinds?.includes('local_process'), JSON.stringify(joined));
    assert.ok(!joined.kinds?.includes('microvm'), `it joined without waiting for the guest image: ${JSON.stringify(joined)}`);
    assert.ok(joined.preparing?.includes('microvm'), JSON.stringify(joined));

    const local = await api(door.url, 'POST', '/v1/jobs', trueJob('local_process'));
    assert.equal(local.status, 202, local.text);
    assert.equal((await waitTerminal(door.url, local.json.job_id)).status, 'completed');

    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    let offered: string[] = [];
    try {
      const { workerId } = worker;
      await waitUntil(
        async () => {
          const { rows } = await client.query<{ kinds: string[] }>('SELECT kinds FROM agent_runner.workers WHERE worker_id = $1', [workerId]);
          offered = rows[0]?.kinds ?? [];
          return offered.includes('microvm');
        },
        'the worker offers microvm',
        { timeoutMs: 10 * 60_000, seen: () => JSON.stringify(offered) },
      );
    } finally {
      await client.end();
    }
    assert.ok(offered.includes('local_process'), JSON.stringify(offered));
    const vm = await api(door.url, 'POST', '/v1/jobs', trueJob('microvm'));
    assert.equal(vm.status, 202, vm.text);
    const ran = await waitTerminal(door.url, vm.json.job_id, 300);
    assert.equal(ran.status, 'completed', JSON.stringify(ran));
  });
});
