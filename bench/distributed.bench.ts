/**
 * The distributed mode on PostgreSQL, in one run on this machine:
 *  - added latency per job: one job at a time, submit to terminal (long poll), through the
 *    embedded service and through a cluster front door with one worker, beside the bare
 *    process (`/usr/bin/true` spawned directly);
 *  - throughput with 1, 2 and 4 workers (one job slot each), as jobs/s and as a ratio to 1;
 *  - the time from a worker's SIGKILL to its job's restart on another worker.
 * The database is a throw-away cluster (test/helpers/postgres.ts), as in the tests.
 *   npm run build && node --import tsx bench/distributed.bench.ts [--jobs N]
 */
import { spawn } from 'node:child_process';
import pg from 'pg';
import { startWorker, type WorkerProcessHandle } from '../test/helpers/cluster.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { api, startServer } from '../test/helpers/server.js';
import { median, timeRuns } from './stats.js';

const arg = (name: string, fallback: number) => {
  const index = process.argv.indexOf(name);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
};
const jobs = arg('--jobs', 100);
const request = { command: { argv: ['/usr/bin/true'] } };

async function runOne(url: string): Promise<void> {
  const accepted = await api(url, 'POST', '/v1/jobs', request);
  if (accepted.status !== 202) throw new Error(`not accepted: ${accepted.text}`);
  const ended = await api(url, 'GET', `/v1/jobs/${accepted.json.job_id}?wait=120`);
  if (ended.json.status !== 'completed') throw new Error(`job ${accepted.json.job_id} ended ${ended.json.status}`);
}

async function throughput(url: string, count: number, clients: number): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < count) {
        next += 1;
        await runOne(url);
      }
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

const bare = median(await timeRuns(30, 3, () => new Promise((resolve, reject) => spawn('/usr/bin/true').on('exit', resolve).on('error', reject))));

const embedded = await startServer(['--concurrency', '1']);
const embeddedP50 = median(await timeRuns(30, 3, () => runOne(embedded.url)));
await embedded.stop();

const database = startPostgres();
const door = await startServer(['--database', database.url, '--workers', '0', '--queue-capacity', String(jobs * 2)]);
const workers: WorkerProcessHandle[] = [await startWorker(database.url, 1)];
const clusterP50 = median(await timeRuns(30, 3, () => runOne(door.url)));
console.log(`one job at a time, submit to terminal, p50: bare /usr/bin/true ${bare.toFixed(1)} ms`);
console.log(`  embedded service ${embeddedP50.toFixed(1)} ms (${(embeddedP50 / bare).toFixed(1)}x bare)`);
console.log(
  `  cluster front door + 1 worker ${clusterP50.toFixed(1)} ms (${(clusterP50 / bare).toFixed(1)}x bare): +${(clusterP50 - embeddedP50).toFixed(1)} ms per job over embedded`,
);

const rates = new Map<number, number>();
for (const count of [1, 2, 4]) {
  while (workers.length < count) workers.push(await startWorker(database.url, 1));
  rates.set(count, await throughput(door.url, jobs, count * 4));
}
const one = rates.get(1)!;
console.log(`throughput, ${jobs} jobs of /usr/bin/true, workers of one slot each (2 cores bound them):`);
for (const [count, rate] of rates) console.log(`  ${count} worker(s): ${rate.toFixed(1)} jobs/s (${(rate / one).toFixed(2)}x of 1 worker)`);

// A worker dies mid-job: how long until another worker runs the job again.
await Promise.all(workers.splice(0).map((worker) => worker.stop()));
const doomed = await startWorker(database.url, 1);
const accepted = await api(door.url, 'POST', '/v1/jobs', { command: { argv: ['/usr/bin/sleep', '60'] } });
const client = new pg.Client({ connectionString: database.url });
await client.connect();
const attemptOf = async () =>
  Number((await client.query('SELECT attempt FROM agent_runner.runs WHERE job_id = $1 AND status = $2', [accepted.json.job_id, 'running'])).rows[0]?.attempt ?? 0);
while ((await attemptOf()) !== 1) await new Promise((resolve) => setTimeout(resolve, 20));
const survivor = await startWorker(database.url, 1);
const killedAt = performance.now();
doomed.child.kill('SIGKILL');
while ((await attemptOf()) !== 2) await new Promise((resolve) => setTimeout(resolve, 20));
const restartMs = performance.now() - killedAt;
console.log(`a worker's SIGKILL to its job running again elsewhere: ${(restartMs / 1000).toFixed(1)} s (heartbeat every 1 s, dead after 6 s, reaped within 1 s more)`);
await api(door.url, 'POST', `/v1/jobs/${accepted.json.job_id}/cancel`);
await client.end();
await survivor.stop();
await door.stop();
database.destroy();
