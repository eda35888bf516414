// The machine's budget for test files, shared by every run of the suite on it (two `npm test`s
// side by side take turns instead of overloading the cores and missing their deadlines):
// - file slots: how many test files run at once (a run's CONCURRENCY; 3 on 2 cores was measured
//   best: most files wait more than they compute);
// - heavy slots: how many of them may be files that boot microVMs by the dozen (under TCG each
//   VM keeps a core busy), one per two cores.
// A slot is an flock(2) on a file under the temp dir held by a small `flock ... cat` child: the
// kernel releases it when that child ends, which it does when we close its stdin or when this
// process dies, however it dies, so a killed run never leaves a slot taken.
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suiteTmpdir } from './test-temp-dirs.mjs';

// Both settable for the runner's own tests, which must not wait on the slots of the run they are in.
const DIR = process.env.AGENT_RUNNER_TEST_SLOTS_DIR ?? join(suiteTmpdir(), 'agent-runner-test-slots');
const RETRY_MS = 1_000;

/** How many heavy files may run at once on this machine. */
export const HEAVY_SLOTS = Number(process.env.AGENT_RUNNER_TEST_HEAVY_SLOTS) || Math.max(1, Math.floor(availableParallelism() / 2));

/** Waits for one of `count` slots named `kind`; resolves with its release. */
export async function takeSlot(kind, count) {
  mkdirSync(DIR, { recursive: true, mode: 0o1777 });
  for (;;) {
    for (let slot = 0; slot < count; slot += 1) {
      const release = await tryLock(join(DIR, `${kind}-${slot}`));
      if (release) return release;
    }
    await sleep(RETRY_MS);
  }
}

/** The lock's release if it was free, null if another process holds it. */
function tryLock(file) {
  return new Promise((resolve, reject) => {
    // -E 75: "held by another" is told apart from flock's own failures (exit 1).
    const holder = spawn('flock', ['--nonblock', '--conflict-exit-code', '75', file, 'sh', '-c', 'echo held; exec cat'], { stdio: ['pipe', 'pipe', 'inherit'] });
    holder.once('error', reject);
    holder.stdout.once('data', () => resolve(() => holder.stdin.end()));
    holder.once('exit', (code) => (code === 75 ? resolve(null) : reject(new Error(`flock ${file} exited ${code}`))));
  });
}
