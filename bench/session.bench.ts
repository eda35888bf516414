/**
 * A cell in a live session against the bare interpreter spawned for the same program, in one
 * run: what an agent saves by keeping a session instead of a snippet per step. Also what a
 * session costs to start (sandbox and interpreter up, ready message read), per backend kind.
 *   node --import tsx bench/session.bench.ts [--iterations N] [--kinds local_process,gvisor,microvm]
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/runner/config.js';
import { RunnerRuntime } from '../src/runner/runtime.js';
import { Sessions } from '../src/sessions/sessions.js';
import { timeBare } from './lean-spawner.js';
import { formatMs, median, percentile, timeRuns } from './stats.js';

const flag = (name: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
const iterations = Number(flag('--iterations')) || 40;
const kinds = (flag('--kinds') ?? 'local_process').split(',');
const runtime = new RunnerRuntime(loadConfig(process.env, { stateDir: join(tmpdir(), 'agent-runner-bench-state') }));
const sessions = new Sessions(runtime);

const cases = [
  { lang: 'python', code: 'print("hello")', bare: ['/usr/bin/python3', '-c', 'print("hello")'] },
  { lang: 'node', code: 'console.log("hello")', bare: [process.execPath, '-e', 'console.log("hello")'] },
];
const summary = (samples: number[]) => `${formatMs(median(samples))} / ${formatMs(percentile(samples, 90))}`.padEnd(22);

console.log(`sessions, ${iterations} runs each, paced 50 ms (median / p90)`);
console.log('kind           lang    bare spawn            cell in a session     ratio   session start');
for (const kind of kinds) {
  for (const { lang, code, bare } of cases) {
    const starts: number[] = [];
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      const startedAt = performance.now();
      made.push((await sessions.create({ lang, backend: { kind: kind as never } })).id);
      starts.push(performance.now() - startedAt);
    }
    const id = made.pop()!;
    for (const other of made) await sessions.remove(other);
    const bareTimes = await timeBare(iterations, 3, bare, 50);
    const cellTimes = await timeRuns(
      iterations,
      3,
      async () => {
        const result = await sessions.exec(id, { code });
        if (result.stdout !== 'hello\n') throw new Error(`the cell failed: ${JSON.stringify(result)}`);
      },
      50,
    );
    await sessions.remove(id);
    console.log(
      `${kind.padEnd(15)}${lang.padEnd(8)}${summary(bareTimes)}${summary(cellTimes)}${`${(median(cellTimes) / median(bareTimes)).toFixed(2)}x`.padEnd(8)}${formatMs(median(starts))}`,
    );
  }
}
await sessions.close();
await runtime.dispose();
