/**
 * A python hello on every available backend, against the bare `python3 -c` spawned directly in
 * the same run: what each isolation costs per job.
 *   node --import tsx bench/backends.bench.ts [--iterations N]
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/runner/config.js';
import { RunnerRuntime } from '../src/runner/runtime.js';
import { executeSnippet } from '../src/runner/snippet.js';
import { timeBare } from './lean-spawner.js';
import { formatMs, median, percentile, timeRuns } from './stats.js';

const iterations = Number(process.argv[process.argv.indexOf('--iterations') + 1]) || 20;
const runtime = new RunnerRuntime(loadConfig(process.env, { stateDir: join(tmpdir(), 'agent-runner-bench-state') }));
const CODE = 'print("hello")';

const cell = (samples: number[]) => `${formatMs(median(samples))} / ${formatMs(percentile(samples, 90))}`.padEnd(22);
console.log(`python hello per backend, ${iterations} sequential runs each (median / p90), ratio to bare python3 -c in this run`);
const bareTimes = await timeBare(iterations, 3, ['/usr/bin/python3', '-c', CODE]);
console.log(`${'bare'.padEnd(15)}${cell(bareTimes)}1.00x`);
for (const backend of await runtime.backends.describe()) {
  if (!backend.available) {
    console.log(`${backend.kind.padEnd(15)}unavailable: ${backend.notes.join('; ')}`);
    continue;
  }
  const times = await timeRuns(iterations, 3, async () => {
    const response = await executeSnippet({ lang: 'python', code: CODE, backend: { kind: backend.kind } }, { runtime });
    if (response.exit_code !== 0) throw new Error(`${backend.kind}: ${response.stderr}`);
  });
  console.log(`${backend.kind.padEnd(15)}${cell(times)}${(median(times) / median(bareTimes)).toFixed(2)}x`);
}
await runtime.dispose();
