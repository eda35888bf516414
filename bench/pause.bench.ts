/**
 * Pause, resume, fork and snapshots of E2B-compatible sandboxes through the unmodified `e2b` SDK
 * against a real `agent-runner serve` (one per backend kind), each figure beside a baseline of the
 * same run:
 *   1. pause and resume (connect to the first command's output) of a sandbox whose home holds
 *      BENCH_HOME_MIB of files, against a bare `tar -cf` (pause) and `tar -xf` (resume) of the same
 *      bytes on the host, and against a fresh `Sandbox.create` to its first output (resume is a
 *      create plus the unpacking);
 *   2. fork to the first command's output in every copy, for 1 and BENCH_FORKS copies;
 *   3. the disk a snapshot of that home takes.
 * Beside the home a process holds BENCH_RESIDENT_MIB of random bytes in memory: a backend that
 * keeps memory (capabilities.pause, gVisor) moves it on every pause and resume; on one that keeps
 * files only it ends with the pause and is started again, untimed, before the next.
 * The bare spawns come from a lean helper (lean-spawner.ts), never from this process.
 *   npm run build && node --import tsx bench/pause.bench.ts
 * Options (env): BENCH_KINDS (local_process,gvisor), BENCH_HOME_MIB (64), BENCH_RESIDENT_MIB (256),
 * BENCH_ROUNDS (5), BENCH_FORKS (10).
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { LeanSpawner } from './lean-spawner.js';
import { eachKind } from './service-process.js';
import { p50p95, ratio } from './stats.js';

const setting = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const kinds = (process.env.BENCH_KINDS ?? 'local_process,gvisor').split(',');
const homeMib = setting('BENCH_HOME_MIB', 64);
const rounds = setting('BENCH_ROUNDS', 5);
const forkCount = setting('BENCH_FORKS', 10);
const residentMib = setting('BENCH_RESIDENT_MIB', 256);
/** Holds residentMib of random bytes (incompressible: a checkpoint moves every page) until killed. */
const HOLDER = `python3 -c "import os, time; held = os.urandom(${residentMib} * 2 ** 20); print('holding', flush=True); time.sleep(10 ** 6)"`;
const scratch = mkdtempSync(join(tmpdir(), 'bench-pause-'));

type Options = { apiKey: string; apiUrl: string; sandboxUrl: string; requestTimeoutMs: number };

/** The same bytes on the host as in the sandbox's home, for the bare tar baselines. */
async function hostTree(lean: LeanSpawner): Promise<{ tree: string; archive: string; unpacked: string }> {
  const tree = join(scratch, 'tree');
  mkdirSync(tree, { recursive: true });
  await lean.time(['/bin/dd', 'if=/dev/urandom', `of=${join(tree, 'data.bin')}`, 'bs=1M', `count=${homeMib}`, 'status=none']);
  const unpacked = join(scratch, 'unpacked');
  mkdirSync(unpacked, { recursive: true });
  return { tree, archive: join(scratch, 'home.tar'), unpacked };
}

async function firstOutput(sandbox: Sandbox): Promise<void> {
  const { stdout } = await sandbox.commands.run('echo hi');
  if (stdout !== 'hi\n') throw new Error(`echo hi answered ${JSON.stringify(stdout)}`);
}

/** The holder runs (started again where the last pause ended it); true when it was still running. */
async function holding(sandbox: Sandbox): Promise<boolean> {
  if ((await sandbox.commands.list()).some((process) => process.args.join(' ').includes('os.urandom'))) return true;
  let started!: () => void;
  const said = new Promise<void>((resolve) => (started = resolve));
  await sandbox.commands.run(HOLDER, { background: true, onStdout: (data) => void (data.includes('holding') && started()) });
  await said;
  return false;
}

async function measurePauseResume(options: Options, lean: LeanSpawner, host: Awaited<ReturnType<typeof hostTree>>): Promise<void> {
  const pauses: number[] = [];
  const resumes: number[] = [];
  const creates: number[] = [];
  const tarOut: number[] = [];
  const tarIn: number[] = [];
  let sandbox = await Sandbox.create('base', options);
  let kept = 0;
  try {
    await sandbox.commands.run(`head -c ${homeMib * 2 ** 20} /dev/urandom > data.bin`);
    for (let i = -1; i < rounds; i++) {
      if ((await holding(sandbox)) && i >= 0) kept += 1;
      const out = await lean.time(['/bin/tar', '-C', host.tree, '-cf', host.archive, '.']);
      const inn = await lean.time(['/bin/tar', '-C', host.unpacked, '-xf', host.archive]);
      let started = performance.now();
      await sandbox.pause();
      const paused = performance.now() - started;
      started = performance.now();
      sandbox = await Sandbox.connect(sandbox.sandboxId, options);
      await firstOutput(sandbox);
      const resumed = performance.now() - started;
      started = performance.now();
      const fresh = await Sandbox.create('base', options);
      await firstOutput(fresh);
      const created = performance.now() - started;
      await fresh.kill();
      if (i < 0) continue;
      pauses.push(paused);
      resumes.push(resumed);
      creates.push(created);
      tarOut.push(out);
      tarIn.push(inn);
    }
    const snapshot = await sandbox.createSnapshot();
    const listed = (await fetch(new URL('/v1/snapshots', options.apiUrl), { headers: { authorization: `Bearer ${options.apiKey}` } }).then((response) => response.json())) as {
      snapshots: Array<{ id: string; bytes: number }>;
    };
    const bytes = listed.snapshots.find((kept) => kept.id === snapshot.snapshotId)?.bytes ?? NaN;
    await Sandbox.deleteSnapshot(snapshot.snapshotId, options);
    console.log(`  home ${homeMib} MiB, a process holding ${residentMib} MiB (kept by ${kept} of ${rounds} pauses); ${rounds} rounds each, taking turns`);
    console.log(`  bare tar -cf            ${p50p95(tarOut)}`);
    console.log(`  pause                   ${p50p95(pauses)}   ${ratio(pauses, tarOut)} of tar -cf`);
    console.log(`  bare tar -xf            ${p50p95(tarIn)}`);
    console.log(`  create -> first output  ${p50p95(creates)}`);
    console.log(`  resume -> first output  ${p50p95(resumes)}   ${ratio(resumes, creates)} of a create`);
    console.log(`  snapshot on disk        ${(bytes / 2 ** 20).toFixed(1)} MiB for ${homeMib} MiB of files`);
  } finally {
    await sandbox.kill().catch(() => undefined);
  }
}

async function measureForks(options: Options): Promise<void> {
  const parent = await Sandbox.create('base', options);
  try {
    await parent.commands.run(`head -c ${homeMib * 2 ** 20} /dev/urandom > data.bin`);
    for (const count of [1, forkCount]) {
      const times: number[] = [];
      for (let i = -1; i < rounds; i++) {
        const started = performance.now();
        const copies = (await parent.fork({ count } as never)) as unknown as Array<Sandbox | Error>;
        const made = copies.filter((copy): copy is Sandbox => copy instanceof Sandbox);
        if (made.length !== count) throw new Error(`fork of ${count}: ${copies.filter((copy) => copy instanceof Error).join('; ')}`);
        await Promise.all(made.map(firstOutput));
        const elapsed = performance.now() - started;
        await Promise.all(made.map((copy) => copy.kill()));
        if (i >= 0) times.push(elapsed);
      }
      console.log(
        `  fork x${String(count).padEnd(3)} -> output in all ${p50p95(times)}   (${(times.sort((a, b) => a - b)[Math.floor(times.length / 2)]! / count).toFixed(0)} ms a copy)`,
      );
    }
  } finally {
    await parent.kill().catch(() => undefined);
  }
}

const lean = new LeanSpawner();
console.log('Pause, resume and fork of E2B sandboxes through the e2b SDK against agent-runner serve (p50 / p95); bare = a lean posix_spawn helper');
try {
  const host = await hostTree(lean);
  await eachKind(kinds, scratch, { AGENT_RUNNER_SANDBOXES__MAX: String(forkCount + 4), AGENT_RUNNER_SANDBOXES__KEPT_DIR: join(scratch, 'kept') }, async (options) => {
    await measurePauseResume(options, lean, host);
    await measureForks(options);
  });
} finally {
  lean.close();
  rmSync(scratch, { recursive: true, force: true });
}
