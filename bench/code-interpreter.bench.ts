/**
 * The code interpreter through the unmodified `@e2b/code-interpreter` SDK against a real
 * `agent-runner serve` (a process of its own per backend kind), each figure beside a bare
 * baseline measured in the same run, taking turns:
 *   1. `runCode("1+1")` on a live python context against a bare `/usr/bin/python3 -c 1+1`
 *      (issue 27's target: at most 0.1x);
 *   2. a matplotlib line plot shown as png (with its chart) against the same bare python drawing
 *      and saving that plot;
 *   3. a context's creation (`createCodeContext`: the bridge and its IPython started in the
 *      sandbox) against a bare `python3 -c 'import IPython.core.interactiveshell'`, the import the
 *      kernel cannot do without.
 * The bare spawns come from a lean python posix_spawn helper (bench/lean-spawner.ts).
 *   npm run build && node --import tsx bench/code-interpreter.bench.ts
 * Options (env): BENCH_KINDS (local_process,gvisor), BENCH_RUNS (runCode round trips, 50),
 * BENCH_PLOTS (10), BENCH_CONTEXTS (5).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from '@e2b/code-interpreter';
import { LeanSpawner } from './lean-spawner.js';
import { eachKind } from './service-process.js';
import { p50p95, ratio } from './stats.js';

const setting = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const kinds = (process.env.BENCH_KINDS ?? 'local_process,gvisor').split(',');
const runs = setting('BENCH_RUNS', 50);
const plots = setting('BENCH_PLOTS', 10);
const contexts = setting('BENCH_CONTEXTS', 5);
const scratch = mkdtempSync(join(tmpdir(), 'bench-code-interpreter-'));
const PLOT = 'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nplt.figure()\nplt.plot([1, 2, 3], [2, 4, 9])\nplt.savefig("/tmp/bench-plot.png")';
const SHOWN = 'import matplotlib.pyplot as plt\nplt.figure()\nplt.plot([1, 2, 3], [2, 4, 9])\nplt.show()';

/** Alternates `bare` and `measured` `count` times after two of each unmeasured; the two series. */
async function takingTurns(count: number, bare: () => Promise<number>, measured: () => Promise<void>): Promise<[number[], number[]]> {
  const bareMs: number[] = [];
  const measuredMs: number[] = [];
  for (let i = -2; i < count; i++) {
    const baseline = await bare();
    const started = performance.now();
    await measured();
    if (i < 0) continue;
    bareMs.push(baseline);
    measuredMs.push(performance.now() - started);
  }
  return [bareMs, measuredMs];
}

const lean = new LeanSpawner();
console.log('The code interpreter through @e2b/code-interpreter against agent-runner serve (p50 / p95); bare = spawned by a lean python posix_spawn helper');
try {
  await eachKind(kinds, scratch, {}, async (options) => {
    const sandbox = await Sandbox.create('base', options);
    try {
      const firstCell = performance.now();
      await sandbox.runCode('1+1');
      console.log(`  first cell (its context started)  ${(performance.now() - firstCell).toFixed(0)} ms`);

      const [bare, cells] = await takingTurns(
        runs,
        () => lean.time(['/usr/bin/python3', '-c', '1+1']),
        async () => {
          if ((await sandbox.runCode('1+1')).text !== '2') throw new Error('1+1 did not answer 2');
        },
      );
      console.log(`  bare python3 -c 1+1      ${p50p95(bare)}   (${runs} runs each, taking turns)`);
      console.log(`  runCode("1+1")           ${p50p95(cells)}   ${ratio(cells, bare)} (target 0.1x)`);

      const [barePlots, shown] = await takingTurns(
        plots,
        () => lean.time(['/usr/bin/python3', '-c', PLOT]),
        async () => {
          if ((await sandbox.runCode(SHOWN)).results[0]?.chart?.type !== 'line') throw new Error('the plot came back without its chart');
        },
      );
      console.log(`  bare python3 plot -> png ${p50p95(barePlots)}   (${plots} each)`);
      console.log(`  runCode(plot) png+chart  ${p50p95(shown)}   ${ratio(shown, barePlots)}`);

      const [bareImports, made] = await takingTurns(
        contexts,
        () => lean.time(['/usr/bin/python3', '-c', 'import IPython.core.interactiveshell']),
        async () => {
          const context = await sandbox.createCodeContext();
          await sandbox.removeCodeContext(context);
        },
      );
      console.log(`  bare import IPython      ${p50p95(bareImports)}   (${contexts} each)`);
      console.log(`  createCodeContext+remove ${p50p95(made)}   ${ratio(made, bareImports)}`);
    } finally {
      await sandbox.kill();
    }
  });
} finally {
  lean.close();
  rmSync(scratch, { recursive: true, force: true });
}
