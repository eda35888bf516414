/**
 * The microvm backend against the bare `python3 -c` spawn in the same run: a python hello on a
 * warm VM (restored from the snapshot and kept ready), on a VM restored for the job, and on a
 * cold-booted VM; the restore alone; and the host memory an idle warm VM holds.
 *   node --import tsx bench/microvm.bench.ts [--iterations N]
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/runner/config.js';
import { RunnerRuntime } from '../src/runner/runtime.js';
import { executeSnippet } from '../src/runner/snippet.js';
import { MicrovmBackend } from '../src/isolation/microvm/microvm-backend.js';
import { timeBare } from './lean-spawner.js';
import { formatMs, median, percentile, timeRuns } from './stats.js';

const iterations = Number(process.argv[process.argv.indexOf('--iterations') + 1]) || 10;
const stateDir = join(tmpdir(), 'agent-runner-bench-state');
const CODE = 'print("hello")';

function runtimeWith(warmPoolSize: number): RunnerRuntime {
  const config = loadConfig(process.env, { stateDir });
  return new RunnerRuntime({ ...config, backends: { ...config.backends, microvm: { ...config.backends.microvm, warmPoolSize } } });
}

async function hello(runtime: RunnerRuntime): Promise<void> {
  const response = await executeSnippet({ lang: 'python', code: CODE, backend: { kind: 'microvm' } }, { runtime });
  if (response.exit_code !== 0) throw new Error(`microvm: ${response.stderr || response.error}`);
}

/** Resident and proportional memory (KiB) of each QEMU process of this runtime's VMs. */
function vmMemory(): Array<{ rss: number; pss: number }> {
  const lines = execFileSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' }).split('\n');
  const pids = lines.filter((line) => line.includes('qemu-system-x86_64') && line.includes(stateDir) && !line.includes('setpriv')).map((line) => line.trim().split(/\s+/)[0]!);
  return pids.map((pid) => {
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? 0);
    return { rss: field('Rss'), pss: field('Pss') };
  });
}

const cell = (samples: number[]) => `${formatMs(median(samples))} / ${formatMs(percentile(samples, 90))}`.padEnd(24);
const warm = runtimeWith(2);
const backend = warm.backends.get('microvm') as MicrovmBackend;
const status = await backend.status();
if (!status.available) {
  console.log(`microvm unavailable: ${status.notes.join('; ')}`);
  process.exit(0);
}
console.log(status.notes[0]);
console.log(`python hello on microvm, ${iterations} sequential runs each (median / p90), ratio to bare python3 -c in this run`);
const bare = await timeBare(iterations, 3, ['/usr/bin/python3', '-c', CODE]);
const row = (name: string, samples: number[]) => console.log(`${name.padEnd(44)}${cell(samples)}${(median(samples) / median(bare)).toFixed(2)}x`);
row('bare python3 -c', bare);

await backend.warmUp();
const idle = vmMemory();
// Paced as an agent's steps are: the pool is full again before each job (the wait is not timed).
const warmRuns: number[] = [];
for (let run = 0; run <= iterations; run += 1) {
  await backend.warmUp();
  const started = performance.now();
  await hello(warm);
  if (run > 0) warmRuns.push(performance.now() - started);
}
row('warm VM (pool ready, paced)', warmRuns);
// No pause: the pool is refilling while jobs arrive, so most jobs get a VM restored for them.
row('back-to-back (restores competing with jobs)', await timeRuns(iterations, 1, () => hello(warm)));
await warm.dispose();

const cold = runtimeWith(0);
row('cold boot (no snapshot used)', await timeRuns(Math.min(iterations, 3), 0, () => hello(cold)));
await cold.dispose();

const kib = (values: number[]) => `${(median(values) / 1024).toFixed(1)} MiB`;
console.log(
  `idle warm VM on the host: RSS ${kib(idle.map((vm) => vm.rss))}, PSS ${kib(idle.map((vm) => vm.pss))} (median of ${idle.length}; the snapshot's pages are shared between VMs, so PSS is each VM's fair share)`,
);
