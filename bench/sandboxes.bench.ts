/**
 * E2B-compatible sandboxes through the unmodified `e2b` SDK against a real `agent-runner serve`
 * (a process of its own, one per backend kind: the server's default backend is the sandbox's),
 * each figure beside a bare baseline measured in the same run:
 *   1. `Sandbox.create('base')` to the first command's output (`echo hi` resolved), sandboxes
 *      created one after another (each killed after), split into the create call (POST
 *      /v2/sandboxes) and the first command; plus the age of each sandbox's pid 1 at that point,
 *      which tells a pre-started sandbox (older than the create call) from one started for it.
 *   2. `commands.run('true')` in a running sandbox against a bare `bash -c true`.
 *   3. a 16 MiB `files.write` then `files.read({ format: 'bytes' })` against a plain `cp` of it.
 * The bare spawns come from a lean helper (/usr/bin/python3 driving posix_spawn and timing it
 * itself), never from this process (issue 30): forking a big node process costs what a user's
 * spawn does not. The bench process loads only the SDK; the service is a separate process.
 *   npm run build && node --import tsx bench/sandboxes.bench.ts
 * Options (env): BENCH_KINDS (local_process,gvisor; microvm is slow under TCG: give it a small
 * BENCH_N), BENCH_N (creates measured, 20), BENCH_WARMUP (creates before, 3), BENCH_PACE_MS (a gap
 * before each create, 0), BENCH_RUNS (`true` round trips, 50), BENCH_FILE_ROUNDS (10),
 * BENCH_FILE_MIB (16), BENCH_INTERNET=1 (sandboxes with internet access, the service allowing it:
 * their network is set up per create, and a pre-started one waits for the create to start its agent).
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { LeanSpawner } from './lean-spawner.js';
import { eachKind } from './service-process.js';
import { p50p95, percentile, ratio } from './stats.js';

const setting = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const kinds = (process.env.BENCH_KINDS ?? 'local_process,gvisor').split(',');
const creates = setting('BENCH_N', 20);
const warmup = setting('BENCH_WARMUP', 3);
const paceMs = setting('BENCH_PACE_MS', 0);
const runs = setting('BENCH_RUNS', 50);
const fileRounds = setting('BENCH_FILE_ROUNDS', 10);
const fileBytes = setting('BENCH_FILE_MIB', 16) * 2 ** 20;
const internet = process.env.BENCH_INTERNET === '1';
const scratch = mkdtempSync(join(tmpdir(), 'bench-sandboxes-'));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Seconds since the sandbox's pid 1 started, read inside it (clock ticks: 10 ms resolution). */
async function sandboxAgeMs(sandbox: Sandbox): Promise<number> {
  const { stdout } = await sandbox.commands.run(`read up _ < /proc/uptime; echo $up $(cut -d' ' -f22 /proc/1/stat) $(getconf CLK_TCK)`);
  const [uptime, startTicks, ticksPerSecond] = stdout.trim().split(' ').map(Number) as [number, number, number];
  return (uptime - startTicks / ticksPerSecond) * 1000;
}

async function measureCreates(options: object): Promise<void> {
  const total: number[] = [];
  const create: number[] = [];
  const firstCommand: number[] = [];
  const kill: number[] = [];
  let preStarted = 0;
  const series: string[] = [];
  for (let i = 0; i < warmup + creates; i++) {
    if (paceMs > 0) await sleep(paceMs);
    const started = performance.now();
    const sandbox = await Sandbox.create('base', options).catch((error: Error) => {
      throw new Error(`create ${i + 1} failed after ${(performance.now() - started).toFixed(0)} ms (those before it, in ms, * pre-started: ${series.join(' ')}): ${error.message}`);
    });
    const created = performance.now();
    const { stdout } = await sandbox.commands.run('echo hi');
    const answered = performance.now();
    if (stdout !== 'hi\n') throw new Error(`echo hi answered ${JSON.stringify(stdout)}`);
    // Older than the whole create call (plus the clock's tick): it was started before we asked.
    const early = (await sandboxAgeMs(sandbox)) > performance.now() - started + 20;
    const killing = performance.now();
    await sandbox.kill();
    series.push(`${(answered - started).toFixed(0)}${early ? '*' : ''}`);
    if (i < warmup) continue;
    total.push(answered - started);
    create.push(created - started);
    firstCommand.push(answered - created);
    kill.push(performance.now() - killing);
    if (early) preStarted += 1;
  }
  console.log(`  create -> first output  ${p50p95(total)}   (${creates} creates after ${warmup} warm-up${paceMs ? `, ${paceMs} ms apart` : ', back to back'})`);
  console.log(`    create (POST)         ${p50p95(create)}`);
  console.log(`    first command         ${p50p95(firstCommand)}`);
  console.log(`  kill                    ${p50p95(kill)}`);
  console.log(`  pre-started sandboxes   ${preStarted} of ${creates}; series in ms (* pre-started, warm-ups first): ${series.join(' ')}`);
}

async function measureRoundTrip(sandbox: Sandbox, lean: LeanSpawner): Promise<void> {
  const bare: number[] = [];
  const sdk: number[] = [];
  for (let i = -3; i < runs; i++) {
    // Taking turns, so a change in the machine's load falls on both alike.
    const bareMs = await lean.time(['/bin/bash', '-c', 'true']);
    const started = performance.now();
    await sandbox.commands.run('true');
    if (i < 0) continue;
    sdk.push(performance.now() - started);
    bare.push(bareMs);
  }
  console.log(`  bare bash -c true       ${p50p95(bare)}   (${runs} runs each, taking turns)`);
  console.log(`  commands.run('true')    ${p50p95(sdk)}   ${ratio(sdk, bare)} (p95 ${(percentile(sdk, 95) / percentile(bare, 95)).toFixed(2)}x)`);
}

async function measureFiles(sandbox: Sandbox, lean: LeanSpawner, source: string, content: Buffer): Promise<void> {
  const data = content.buffer.slice(content.byteOffset, content.byteOffset + content.byteLength) as ArrayBuffer;
  const digest = createHash('sha256').update(content).digest('hex');
  const copy = join(scratch, 'copy.bin');
  const cp: number[] = [];
  const writes: number[] = [];
  const reads: number[] = [];
  const trips: number[] = [];
  for (let i = -1; i < fileRounds; i++) {
    const cpMs = await lean.time(['/bin/cp', source, copy]);
    const started = performance.now();
    await sandbox.files.write('bench.bin', data);
    const written = performance.now();
    const back = await sandbox.files.read('bench.bin', { format: 'bytes' });
    const read = performance.now();
    if (createHash('sha256').update(back).digest('hex') !== digest) throw new Error('the file read back differs from the one written');
    if (i < 0) continue;
    cp.push(cpMs);
    writes.push(written - started);
    reads.push(read - written);
    trips.push(read - started);
  }
  const mib = fileBytes / 2 ** 20;
  const rate = (samples: readonly number[], moved = mib) => `${(moved / (percentile(samples, 50) / 1000)).toFixed(0).padStart(5)} MiB/s`;
  console.log(`  bare cp (${mib} MiB)        ${p50p95(cp)}   ${rate(cp)}   (${fileRounds} rounds each, taking turns)`);
  console.log(`  files.write             ${p50p95(writes)}   ${rate(writes)}`);
  console.log(`  files.read (bytes)      ${p50p95(reads)}   ${rate(reads)}`);
  console.log(`  write + read back       ${p50p95(trips)}   ${rate(trips, 2 * mib)}   ${ratio(trips, cp)} of cp`);
}

const lean = new LeanSpawner();
const content = randomBytes(fileBytes);
const source = join(scratch, 'source.bin');
writeFileSync(source, content);
console.log(
  `E2B sandboxes through the e2b SDK against agent-runner serve (p50 / p95)${internet ? ', with internet access' : ''}; bare = spawned by a lean python posix_spawn helper`,
);
try {
  await eachKind(kinds, scratch, internet ? { AGENT_RUNNER_SANDBOXES__ALLOW_INTERNET_ACCESS: 'true' } : {}, async (connection) => {
    const options = { ...connection, allowInternetAccess: internet };
    await measureCreates(options);
    const sandbox = await Sandbox.create('base', options);
    try {
      await measureRoundTrip(sandbox, lean);
      await measureFiles(sandbox, lean, source, content);
    } finally {
      await sandbox.kill();
    }
  });
} finally {
  lean.close();
  rmSync(scratch, { recursive: true, force: true });
}
