/**
 * Code-task throughput: a trivial python and node task through runTask, against the bare
 * interpreter spawned directly with a clean env, in one run; the same trivial program as a
 * snippet shows what the sandbox alone costs. They alternate in blocks so that load from
 * other tenants of the machine falls on all alike.
 * Two regimes, as in snippet.bench.ts: "paced" leaves 50 ms between calls (the warm pool
 * refills in the gap), "back-to-back" leaves none.
 *   node --import tsx bench/tasks.bench.ts [--iterations N]
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/runner/config.js';
import { RunnerRuntime } from '../src/runner/runtime.js';
import { executeSnippet } from '../src/runner/snippet.js';
import { runTask } from '../src/tasks/run-task.js';
import { bareMs } from './lean-spawner.js';
import { formatMs, median, percentile, timeRuns } from './stats.js';

const iterations = Number(process.argv[process.argv.indexOf('--iterations') + 1]) || 60;
const BLOCK = 10;
const runtime = new RunnerRuntime(loadConfig(process.env, { stateDir: join(tmpdir(), 'agent-runner-bench-state') }));

async function task(request: Record<string, unknown>): Promise<void> {
  const response = await runTask(request, { runtime });
  if ('error' in response) throw new Error(`task failed: ${response.error.message}\n${response.error.stderr}`);
}

async function snippet(lang: string, code: string): Promise<void> {
  const response = await executeSnippet({ lang, code }, { runtime });
  if (response.exit_code !== 0) throw new Error(`snippet failed: ${response.stderr}`);
}

const items = [{ json: { n: 1 } }];
const cases = [
  { lang: 'python', request: { lang: 'python', mode: 'all_items', items, code: 'return _items' }, program: 'print(1)', bare: ['/usr/bin/python3', '-c', 'print(1)'] },
  { lang: 'node', request: { lang: 'node', mode: 'all_items', items, code: 'return items' }, program: 'console.log(1)', bare: [process.execPath, '-e', 'console.log(1)'] },
];

type Runners = Record<'bare' | 'snippet' | 'task', () => Promise<unknown>>;

/** Blocks of BLOCK runs of each runner in turn, until each has `iterations` samples. */
async function alternate(runners: Runners, paceMs: number): Promise<Record<keyof Runners, number[]>> {
  const names = Object.keys(runners) as Array<keyof Runners>;
  const samples = { bare: [] as number[], snippet: [] as number[], task: [] as number[] };
  for (const name of names) await timeRuns(0, 3, runners[name]);
  while (samples.bare.length < iterations) {
    for (const name of names) samples[name].push(...(await timeRuns(BLOCK, 0, runners[name], paceMs)));
  }
  return samples;
}

const perSecond = (samples: number[]) => (1000 / median(samples)).toFixed(1).padStart(6);
const cell = (samples: number[]) => `${perSecond(samples)}/s  ${formatMs(median(samples))} / ${formatMs(percentile(samples, 90))}`.padEnd(30);

console.log(
  `code tasks, ${iterations} sequential runs each (rate from the median; median / p90); bare = the interpreter spawned with the same clean env by a lean posix_spawn helper (the round trip to it included)`,
);
for (const [regime, paceMs] of [
  ['paced 50 ms', 50],
  ['back-to-back', 0],
] as const) {
  console.log(`\n${regime}`);
  console.log('lang    bare                          executeSnippet                runTask                       runTask/bare  snippet/bare');
  for (const { lang, request, program, bare } of cases) {
    const samples = await alternate({ bare: () => bareMs(bare), snippet: () => snippet(lang, program), task: () => task(request) }, paceMs);
    const ratio = (of: number[]) => `${(median(of) / median(samples.bare)).toFixed(2)}x`;
    console.log(`${lang.padEnd(8)}${cell(samples.bare)}${cell(samples.snippet)}${cell(samples.task)}${ratio(samples.task).padEnd(14)}${ratio(samples.snippet)}`);
  }
}
await runtime.dispose();
