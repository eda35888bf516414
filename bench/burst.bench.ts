/**
 * Many creates at once (issue 46's burst: 100 `Sandbox.create()` together, as the outside burst
 * benchmark that compares sandbox providers runs them), through the unmodified `e2b` SDK against
 * a real `agent-runner serve` whose sandboxes.max admits them all:
 *   1. one create alone to its first command's output (`echo hi` resolved), the anchor: 5 after 2
 *      warm-ups, p50;
 *   2. BENCH_BURST creates started in the same moment, each timed from that moment to its first
 *      command's output: how many succeed, p50 / p99 / max, and the p50's ratio to the anchor;
 *   3. the host memory each of them costs idle: MemAvailable (/proc/meminfo) before the burst
 *      minus after it, once the sandboxes have been idle for BENCH_IDLE_MS, divided by their number.
 * Then every sandbox is killed.
 *   npm run build && node --import tsx bench/burst.bench.ts
 * Options (env): BENCH_KINDS (local_process), BENCH_BURST (100), BENCH_IDLE_MS (3000), BENCH_WARM
 * (pre-started sandboxes kept per template, backends.local_process.warmPerTemplate: the service's
 * default unless given) and BENCH_SETTLE_MS (30000: how long they are given to start before the burst).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { eachKind } from './service-process.js';
import { percentile, ratio } from './stats.js';

const setting = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const kinds = (process.env.BENCH_KINDS ?? 'local_process').split(',');
const burst = setting('BENCH_BURST', 100);
const idleMs = setting('BENCH_IDLE_MS', 3000);
const warm = setting('BENCH_WARM', 0);
const settleMs = setting('BENCH_SETTLE_MS', 30_000);
const scratch = mkdtempSync(join(tmpdir(), 'bench-burst-'));

type Options = Parameters<typeof Sandbox.create>[1];

/** A create and its first command's output; the sandbox, kept for the caller to kill. */
async function createToOutput(options: Options): Promise<Sandbox> {
  const sandbox = await Sandbox.create('base', options);
  const { stdout } = await sandbox.commands.run('echo hi');
  if (stdout !== 'hi\n') throw new Error(`echo hi answered ${JSON.stringify(stdout)}`);
  return sandbox;
}

function memAvailableBytes(): number {
  const kib = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1];
  return Number(kib) * 1024;
}

const ms = (value: number) => `${value.toFixed(0)} ms`;

// sandboxes.max admits the burst; so does the front door's cap on one address's connections
// (service.clients.maxConnectionsPerAddress, 128): every client here is on loopback, and each
// sandbox's command stream is a connection of its own, as from one orchestrator's process.
const service = {
  AGENT_RUNNER_SANDBOXES__MAX: String(burst + 8),
  AGENT_RUNNER_SERVICE__CLIENTS__MAX_CONNECTIONS_PER_ADDRESS: String(4 * burst + 128),
  ...(warm > 0 && { AGENT_RUNNER_BACKENDS__LOCAL_PROCESS__WARM_PER_TEMPLATE: String(warm) }),
};

await eachKind(kinds, scratch, service, async (options) => {
  const alone: number[] = [];
  for (let i = 0; i < 7; i++) {
    const started = performance.now();
    const sandbox = await createToOutput(options);
    if (i >= 2) alone.push(performance.now() - started);
    await sandbox.kill();
  }
  const anchor = percentile(alone, 50);
  console.log(`  one create alone -> output   ${ms(anchor)} p50 (5 after 2 warm-ups)`);
  // With BENCH_WARM, the pool of pre-started sandboxes is given time to fill before the burst:
  // what they cost is what the host gave them meanwhile (the burst's own are those).
  if (warm > 0) {
    const empty = memAvailableBytes();
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    console.log(`  host memory per pre-started sandbox  ${((empty - memAvailableBytes()) / warm / 2 ** 20).toFixed(1)} MiB (MemAvailable, ${warm} started in ${settleMs} ms)`);
  }

  const before = memAvailableBytes();
  const started = performance.now();
  const outcomes = await Promise.allSettled(
    Array.from({ length: burst }, async () => {
      const sandbox = await createToOutput(options);
      return { sandbox, ms: performance.now() - started };
    }),
  );
  const made = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
  const failures = outcomes.flatMap((outcome) =>
    outcome.status === 'rejected' ? [`${String((outcome.reason as Error).message ?? outcome.reason)} ${String((outcome.reason as { cause?: unknown }).cause ?? '')}`] : [],
  );
  const times = made.map((one) => one.ms);
  console.log(`  ${burst} creates at once        ${made.length} of ${burst} succeeded`);
  if (times.length > 0) {
    const p50 = percentile(times, 50);
    console.log(`    to output                 ${ms(p50)} p50 / ${ms(percentile(times, 99))} p99 / ${ms(Math.max(...times))} max (${ratio(times, alone)} of one alone)`);
  }
  for (const [message, count] of countBy(failures)) console.log(`    failed x${count}: ${message.slice(0, 300)}`);

  if (warm === 0) {
    await new Promise((resolve) => setTimeout(resolve, idleMs));
    const perSandbox = (before - memAvailableBytes()) / Math.max(1, made.length);
    console.log(`  host memory per idle sandbox  ${(perSandbox / 2 ** 20).toFixed(1)} MiB (MemAvailable, ${made.length} sandboxes idle ${idleMs} ms)`);
  }
  await Promise.allSettled(made.map((one) => one.sandbox.kill()));
});
rmSync(scratch, { recursive: true, force: true });

function countBy(values: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return counts;
}
