import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Cluster } from '../../../src/postgres/cluster.js';
import { startPostgres, type ThrowawayPostgres } from '../../helpers/postgres.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Security round 4, case 1 (tenants), in the distributed mode: a job's API key goes where its
 * record goes, its `agent_runner.runs` row, so every front door answers a key with its own jobs
 * only (test/integration/security/tenants.test.ts has the embedded mode, through HTTP).
 */
describe('the run table keeps the API key each job came with', () => {
  let database: ThrowawayPostgres;

  before(() => {
    database = startPostgres();
  });
  after(() => database.destroy());

  test("a key lists its own jobs; a cursor naming another key's job names none for it; the token sees all", async () => {
    const cluster = new Cluster(database.url, testRuntime(), { applicationName: 'test' });
    await cluster.open();
    try {
      const { runs, db, queue } = cluster;
      const insert = (jobId: string, apiKey?: string) =>
        db.transaction(async (client) =>
          runs.insert(client, {
            jobId,
            traceId: undefined,
            ...(apiKey === undefined ? {} : { apiKey }),
            backend: 'local_process',
            request: {},
            payload: { command: { argv: ['true'] } },
            queueJobId: await queue.send(client, jobId),
          }),
        );
      assert.equal((await insert('alices', 'alice')).api_key, 'alice');
      await insert('bobs', 'bob');
      await insert('tokens');
      assert.equal((await runs.get('alices'))?.api_key, 'alice');
      assert.equal((await runs.get('tokens'))?.api_key, undefined, 'the service token’s job names no key');

      const listed = async (apiKey?: string) => (await runs.list(10, undefined, undefined, apiKey))!.jobs.map((job) => job.job_id).sort();
      assert.deepEqual(await listed('alice'), ['alices']);
      assert.deepEqual(await listed('bob'), ['bobs']);
      assert.deepEqual(await listed(), ['alices', 'bobs', 'tokens']);
      assert.equal(await runs.list(10, 'bobs', undefined, 'alice'), null);
      assert.notEqual(await runs.list(10, 'bobs', undefined), null);
    } finally {
      await cluster.close();
    }
  });
});
