/**
 * Where a warm snippet's milliseconds go (issue 30): a python and a node hello through
 * executeSnippet on local_process, paced as an agent calls, each call cut into phases by
 * timing the backend's own calls on the real path (the instance's prepare and its sandbox's
 * start are wrapped, nothing else changes):
 *   request      validation, the toolchain, the template, until the backend is asked;
 *   claim        prepare(): a pre-started sandbox taken from the warm pool (or a cold start);
 *   program      start() to the first byte of output: the program sent down the pipe, read,
 *                compiled and run by the interpreter waiting in the sandbox;
 *   exit         first output to start() resolving: the interpreter's exit, the sandbox's
 *                teardown (bwrap and its namespaces), the pipes' close, the cgroup's counts;
 *   answer       start() resolving to executeSnippet's answer (the response made).
 * Against, in the same run: the bare program spawned by the lean helper, and the waiting
 * interpreter's own floor outside any sandbox (started ahead by the lean helper, timed from
 * the program written to its exit); and the same snippet through the guest socket.
 *   npm run build && node --import tsx bench/warm-path.bench.ts [--iterations N]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GuestClient } from '../src/guest/client.js';
import { startGuestServer } from '../src/guest/server.js';
import { findLanguage } from '../src/languages/catalog.js';
import { isMissing } from '../src/languages/toolchain.js';
import { loadConfig } from '../src/runner/config.js';
import { RunnerRuntime } from '../src/runner/runtime.js';
import { executeSnippet } from '../src/runner/snippet.js';
import type { PreparedSandbox, SandboxIO } from '../src/isolation/types.js';
import { leanSpawner, timeBare } from './lean-spawner.js';
import { formatMs, median, timeRuns } from './stats.js';

const iterations = Number(process.argv[process.argv.indexOf('--iterations') + 1]) || 40;
const PACE_MS = 50;
const PHASES = ['request', 'claim', 'program', 'exit', 'answer'] as const;
type Phase = (typeof PHASES)[number];

const runtime = new RunnerRuntime(loadConfig(process.env, { stateDir: join(tmpdir(), 'agent-runner-bench-state') }));
const backend = runtime.backends.get('local_process');
const socketPath = join(mkdtempSync(join(tmpdir(), 'bench-guest-')), 'guest.sock');
const guest = await startGuestServer({ kind: 'unix', path: socketPath }, { runtime, concurrency: 1 });
const client = await GuestClient.connect({ kind: 'unix', path: socketPath });

/** The marks of the call in flight: each phase ends at its mark. */
let marks: Partial<Record<Phase | 'called', number>> = {};
const prepare = backend.prepare.bind(backend);
backend.prepare = async (template) => {
  marks.request = performance.now();
  const sandbox: PreparedSandbox = await prepare(template);
  marks.claim = performance.now();
  const start = sandbox.start.bind(sandbox);
  sandbox.start = async (io: SandboxIO) => {
    const stdout = io.stdout;
    const timed = {
      ...io,
      stdout: {
        write: (chunk: Buffer) => {
          marks.program ??= performance.now();
          stdout.write(chunk);
        },
      },
    };
    const outcome = await start(timed);
    marks.exit = performance.now();
    return outcome;
  };
  return sandbox;
};

async function phased(lang: string, code: string): Promise<Record<Phase, number>> {
  marks = { called: performance.now() };
  const response = await executeSnippet({ lang, code }, { runtime });
  marks.answer = performance.now();
  if (response.exit_code !== 0) throw new Error(`snippet failed: ${response.stderr}`);
  let previous = marks.called!;
  const phases = {} as Record<Phase, number>;
  for (const phase of PHASES) {
    const at = marks[phase] ?? previous;
    phases[phase] = at - previous;
    previous = at;
  }
  return phases;
}

/** The waiting interpreter's input, as SnippetJob writes it: a header line, then the program. */
function waitingInput(source: string, code: string): string {
  return `${JSON.stringify({ source, bytes: Buffer.byteLength(code), args: [] })}\n${code}`;
}

const floorDir = mkdtempSync(join(tmpdir(), 'bench-floor-'));
const cases = [
  { lang: 'python', code: 'print("hello")', file: 'main.py' },
  { lang: 'node', code: 'console.log("hello")', file: 'script.js' },
];
console.log(`warm snippet path on local_process, paced ${PACE_MS} ms, ${iterations} runs each after 3 warm-ups (medians; phases are medians of each phase)`);
for (const { lang, code, file } of cases) {
  const language = findLanguage(lang)!;
  const toolchain = await runtime.toolchains.get(language);
  if (isMissing(toolchain)) throw new Error(toolchain.message);
  const bareArgv = [toolchain.executable, lang === 'python' ? '-c' : '-e', code];
  const bare = await timeBare(iterations, 3, bareArgv, PACE_MS);
  const waiting = language.waiting!(toolchain, { memoryBytes: runtime.config.snippet.memoryBytes });
  const floor: number[] = [];
  for (let i = 0; i < iterations + 3; i++) {
    const ms = await leanSpawner().timeWaiting(waiting.argv, waitingInput(join(floorDir, `${i}`, file), code), 300);
    if (i >= 3) floor.push(ms);
  }
  const runs: Array<Record<Phase, number>> = [];
  for (let i = 0; i < iterations + 3; i++) {
    await new Promise((resolve) => setTimeout(resolve, PACE_MS));
    const phases = await phased(lang, code);
    if (i >= 3) runs.push(phases);
  }
  const totals = runs.map((phases) => PHASES.reduce((sum, phase) => sum + phases[phase], 0));
  const socket = await timeRuns(iterations, 3, () => client.request({ lang, code }), PACE_MS);
  const bareMedian = median(bare);
  console.log(`\n${lang}`);
  console.log(`  bare spawn (lean helper)          ${formatMs(bareMedian)}`);
  console.log(`  waiting interpreter, no sandbox   ${formatMs(median(floor))}  (${(median(floor) / bareMedian).toFixed(2)}x)`);
  console.log(`  executeSnippet                    ${formatMs(median(totals))}  (${(median(totals) / bareMedian).toFixed(2)}x)`);
  for (const phase of PHASES) console.log(`    ${phase.padEnd(10)}                      ${formatMs(median(runs.map((phases) => phases[phase])))}`);
  console.log(`  guest socket                      ${formatMs(median(socket))}  (${(median(socket) / bareMedian).toFixed(2)}x)`);
}
rmSync(floorDir, { recursive: true, force: true });
client.close();
await guest.close();
await runtime.dispose();
