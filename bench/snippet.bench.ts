/**
 * Snippet overhead: the bare interpreter (or prebuilt binary) spawned directly, against the same
 * snippet through executeSnippet and through a guest-runner connection, in one run.
 * Two regimes: "paced" leaves 50 ms between calls (an agent's rhythm; the warm pool refills
 * in the gap), "back-to-back" gives it none (refilling competes with the next job for 2 cores).
 *   node --import tsx bench/snippet.bench.ts [--iterations N]
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GuestClient } from '../src/guest/client.js';
import { startGuestServer } from '../src/guest/server.js';
import { loadConfig } from '../src/runner/config.js';
import { RunnerRuntime } from '../src/runner/runtime.js';
import { executeSnippet } from '../src/runner/snippet.js';
import { isMissing } from '../src/languages/toolchain.js';
import { findLanguage } from '../src/languages/catalog.js';
import { timeBare } from './lean-spawner.js';
import { formatMs, median, percentile, timeRuns } from './stats.js';

const iterations = Number(process.argv[process.argv.indexOf('--iterations') + 1]) || 40;
const runtime = new RunnerRuntime(loadConfig(process.env, { stateDir: join(tmpdir(), 'agent-runner-bench-state') }));
const socketPath = join(mkdtempSync(join(tmpdir(), 'bench-guest-')), 'guest.sock');
const guest = await startGuestServer({ kind: 'unix', path: socketPath }, { runtime, concurrency: 1 });
const client = await GuestClient.connect({ kind: 'unix', path: socketPath });

async function checked(response: Promise<{ exit_code: number; stderr: string }>): Promise<void> {
  const result = await response;
  if (result.exit_code !== 0) throw new Error(`snippet failed: ${result.stderr}`);
}

interface Case {
  lang: string;
  code: string;
  bare: () => Promise<string[]>;
}

const GO = 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n';
const RUST = 'fn main() { println!("hello"); }\n';

/** The cached binary the runner built, run directly: the fair "prebuilt" baseline. */
async function prebuilt(lang: string, code: string): Promise<string[]> {
  await checked(executeSnippet({ lang, code }, { runtime }));
  const toolchain = await runtime.toolchains.get(findLanguage(lang)!);
  if (isMissing(toolchain)) throw new Error(toolchain.message);
  return [runtime.compileCache.pathFor(runtime.compileCache.key(lang, toolchain.version, code))];
}

const cases: Case[] = [
  { lang: 'python', code: 'print("hello")', bare: async () => ['/usr/bin/python3', '-c', 'print("hello")'] },
  { lang: 'bash', code: 'echo hello', bare: async () => ['/usr/bin/bash', '-c', 'echo hello'] },
  { lang: 'node', code: 'console.log("hello")', bare: async () => [process.execPath, '-e', 'console.log("hello")'] },
  { lang: 'go', code: GO, bare: () => prebuilt('go', GO) },
  { lang: 'rust', code: RUST, bare: () => prebuilt('rust', RUST) },
];

console.log(`snippet overhead, ${iterations} sequential runs each (median / p90); bare = same program spawned directly with the same clean env`);
for (const [regime, paceMs] of [
  ['paced 50 ms', 50],
  ['back-to-back', 0],
] as const) {
  console.log(`\n${regime}`);
  console.log('lang    bare                  executeSnippet        guest connection      median overhead   ratio');
  for (const { lang, code, bare } of cases) {
    const argv = await bare();
    const bareTimes = await timeBare(iterations, 3, argv, paceMs);
    const libraryTimes = await timeRuns(iterations, 3, () => checked(executeSnippet({ lang, code }, { runtime })), paceMs);
    const guestTimes = await timeRuns(iterations, 3, () => checked(client.request({ lang, code })), paceMs);
    const cell = (samples: number[]) => `${formatMs(median(samples))} / ${formatMs(percentile(samples, 90))}`.padEnd(22);
    const overhead = median(libraryTimes) - median(bareTimes);
    console.log(
      `${lang.padEnd(8)}${cell(bareTimes)}${cell(libraryTimes)}${cell(guestTimes)}${`+${formatMs(overhead)}`.padEnd(18)}${(median(libraryTimes) / median(bareTimes)).toFixed(2)}x`,
    );
  }
}
client.close();
await guest.close();
await runtime.dispose();
