/**
 * Service load: N short jobs (`true`) submitted over HTTP by C concurrent clients, each
 * waiting (long-poll) for its job's terminal state; then the same jobs through the library
 * (runJob) with the same concurrency, in the same run. Reports jobs/s, p50/p99 submit-to-
 * terminal latency, the service's overhead per job, lost jobs, the CPU of the front door and of
 * its worker process, and the front door's RSS.
 *   npm run build && node --import tsx bench/service.bench.ts [--jobs N] [--clients C]
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/runner/config.js';
import { runJob } from '../src/runner/run-job.js';
import { RunnerRuntime } from '../src/runner/runtime.js';
import { Semaphore } from '../src/util/semaphore.js';
import { median, percentile } from './stats.js';

const arg = (name: string, fallback: number) => {
  const index = process.argv.indexOf(name);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
};
const jobs = arg('--jobs', 2000);
const clients = arg('--clients', 50);
const concurrency = availableParallelism();
const stateDir = join(tmpdir(), 'agent-runner-bench-state');
const request = { command: { argv: ['true'] } };

/** CPU time (user + system) the process has used, in ms. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100;
}

/** The worker process the front door forks at start (its only node child). */
function workerPid(frontDoor: number): number {
  const children = readFileSync(`/proc/${frontDoor}/task/${frontDoor}/children`, 'utf8').trim().split(/\s+/).map(Number);
  const worker = children.find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('worker-main'));
  if (worker === undefined) throw new Error('the service has no worker process');
  return worker;
}

function rssKiB(pid: number): number {
  const match = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? 0);
}

async function measure(label: string, submit: () => Promise<boolean>): Promise<{ latencies: number[]; wallMs: number; lost: number }> {
  const latencies: number[] = [];
  let next = 0;
  let lost = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < jobs) {
        next += 1;
        const t = performance.now();
        if (!(await submit())) lost += 1;
        latencies.push(performance.now() - t);
      }
    }),
  );
  const wallMs = performance.now() - started;
  console.log(
    `${label.padEnd(9)} ${(jobs / (wallMs / 1000)).toFixed(1).padStart(7)} jobs/s   p50 ${median(latencies).toFixed(1).padStart(7)} ms   p99 ${percentile(latencies, 99).toFixed(1).padStart(7)} ms   per job ${(wallMs / jobs).toFixed(2)} ms   lost ${lost}`,
  );
  return { latencies, wallMs, lost };
}

// Library: the same jobs, the same number of workers, no HTTP and no run store.
const runtime = new RunnerRuntime(loadConfig(process.env, { stateDir }));
const workers = new Semaphore(concurrency);
console.log(`${jobs} jobs (${request.command.argv.join(' ')}), ${clients} concurrent clients, ${concurrency} workers`);
const benchCpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};
let cpuAtStart = benchCpuMs();
const library = await measure('library', async () => (await workers.run(() => runJob(request, { runtime }))).status === 'completed');
// The library's own CPU per job (this process ran the jobs), to set the service's two processes against.
const libraryCpuPerJob = (benchCpuMs() - cpuAtStart) / jobs;
await runtime.dispose();

const cli = fileURLToPath(new URL('../dist/cli/agent-runner.js', import.meta.url));
// Every route but /health needs the token, so the measurement includes checking it.
const token = randomBytes(16).toString('hex');
const auth = { authorization: `Bearer ${token}` };
const server = spawn(
  process.execPath,
  [
    cli,
    'serve',
    '--addr',
    '127.0.0.1:0',
    '--store-dir',
    mkdtempSync(join(tmpdir(), 'bench-store-')),
    '--log-level',
    'info',
    '--queue-capacity',
    String(jobs),
    '--concurrency',
    String(concurrency),
    '--token',
    token,
  ],
  {
    env: { ...process.env, AGENT_RUNNER_STATE_DIR: stateDir },
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);
const url = await new Promise<string>((resolve) => {
  let buffered = '';
  const onData = (chunk: Buffer) => {
    buffered += chunk.toString();
    const match = /"url":"([^"]+)"/.exec(buffered);
    if (match) {
      server.stdout!.off('data', onData);
      // Drain the rest so the server never blocks on a full pipe.
      server.stdout!.resume();
      resolve(match[1]!);
    }
  };
  server.stdout!.on('data', onData);
});
const worker = workerPid(server.pid!);
const rssBefore = rssKiB(server.pid!);
const cpuBefore = cpuMs(server.pid!);
const workerCpuBefore = cpuMs(worker);
cpuAtStart = benchCpuMs();
const service = await measure('service', async () => {
  const submitted = await fetch(`${url}/v1/jobs`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth }, body: JSON.stringify(request) });
  if (submitted.status !== 202) return false;
  const { job_id } = (await submitted.json()) as { job_id: string };
  const state = (await (await fetch(`${url}/v1/jobs/${job_id}?wait=300`, { headers: auth })).json()) as { status: string };
  return state.status === 'completed';
});
// This process is then only the HTTP client: its CPU competes with the service's for the same cores.
const clientCpuPerJob = (benchCpuMs() - cpuAtStart) / jobs;
const rssAfter = rssKiB(server.pid!);
const serverCpuPerJob = (cpuMs(server.pid!) - cpuBefore) / jobs;
const workerCpuPerJob = (cpuMs(worker) - workerCpuBefore) / jobs;
server.kill('SIGTERM');

const overheadP50 = median(service.latencies) - median(library.latencies);
const overheadPerJob = (service.wallMs - library.wallMs) / jobs;
console.log(
  `service overhead: p50 latency +${overheadP50.toFixed(1)} ms, wall time per job +${overheadPerJob.toFixed(2)} ms (target < 5 ms at p50); ratio ${(service.wallMs / library.wallMs).toFixed(2)}x`,
);
console.log(
  `front door CPU per job ${serverCpuPerJob.toFixed(2)} ms (HTTP, admission, run store; it never forks); worker process ${workerCpuPerJob.toFixed(2)} ms (leases, sandbox launches); on 2 cores both compete with the jobs`,
);
console.log(
  `CPU per job: library ${libraryCpuPerJob.toFixed(2)} ms; service ${(serverCpuPerJob + workerCpuPerJob).toFixed(2)} ms (front door and worker), +${(serverCpuPerJob + workerCpuPerJob - libraryCpuPerJob).toFixed(2)} ms over the library; the bench's HTTP client ${clientCpuPerJob.toFixed(2)} ms`,
);
console.log(`server RSS before ${(rssBefore / 1024).toFixed(1)} MiB, after ${(rssAfter / 1024).toFixed(1)} MiB`);
