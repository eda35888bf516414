/**
 * Idle sandboxes frozen (sandboxes.freezeIdleSeconds, issue 46's freezer) through the unmodified
 * `e2b` SDK against a real `agent-runner serve` on local_process: a command's first output
 * (`commands.run('echo hi')` resolved) in a sandbox frozen whole by the cgroup freezer, which the
 * request thaws first, against the same command in the same sandbox running, taken in turns.
 * Frozen is seen from the host: the freezer state of the group its sleeper is in.
 *   npm run build && node --import tsx bench/freeze.bench.ts
 * Options (env): BENCH_ROUNDS (10).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Sandbox } from 'e2b';
import { eachKind } from './service-process.js';
import { p50p95, ratio } from './stats.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 10);
const scratch = mkdtempSync(join(tmpdir(), 'bench-freeze-'));

/** Whether the freezer group (cgroup v1) of a host process is frozen. */
function frozen(pid: string): boolean {
  const group = readFileSync(`/proc/${pid}/cgroup`, 'utf8')
    .split('\n')
    .find((line) => line.split(':')[1] === 'freezer')
    ?.split(':')[2];
  if (group === undefined) throw new Error('no cgroup v1 freezer here');
  return readFileSync(`/sys/fs/cgroup/freezer${group}/freezer.state`, 'utf8').trim() === 'FROZEN';
}

async function firstOutput(sandbox: Sandbox): Promise<number> {
  const started = performance.now();
  const { stdout } = await sandbox.commands.run('echo hi');
  if (stdout !== 'hi\n') throw new Error(`echo hi answered ${JSON.stringify(stdout)}`);
  return performance.now() - started;
}

await eachKind(['local_process'], scratch, { AGENT_RUNNER_SANDBOXES__FREEZE_IDLE_SECONDS: '1' }, async (options) => {
  const sandbox = await Sandbox.create('base', options);
  const marker = `4545.${Math.floor(Math.random() * 1e6)}`;
  await sandbox.commands.run(`sleep ${marker}`, { background: true });
  await sleep(200);
  const pid = execFileSync('pgrep', ['-f', `^sleep ${marker}`], { encoding: 'utf8' }).trim();
  const running: number[] = [];
  const thawed: number[] = [];
  for (let round = 0; round < rounds; round++) {
    running.push(await firstOutput(sandbox));
    while (!frozen(pid)) await sleep(20);
    thawed.push(await firstOutput(sandbox));
  }
  console.log(`  ${rounds} rounds, taking turns`);
  console.log(`  running -> first output   ${p50p95(running)}`);
  console.log(`  frozen  -> first output   ${p50p95(thawed)}   ${ratio(thawed, running)} of running`);
  await sandbox.kill();
});
rmSync(scratch, { recursive: true, force: true });
