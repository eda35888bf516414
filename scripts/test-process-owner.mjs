// Loaded into every test file's process (node --import, by scripts/run-tests.sh; the runner's
// children inherit its flags): the file's pid becomes AGENT_RUNNER_TEST_OWNER, which every process
// it starts inherits (services, CLIs, QEMUs, runsc). When the file's process exits, its tests and
// their `after` hooks done, nothing it started may still run: what does is given a moment to end,
// then killed and named, and the file fails ("test failed", exit code 1), so a leak is seen where
// it was made and never reaches the next file.
//
// Its temp dir is its own too (scripts/test-temp-dirs.mjs), removed once nothing runs in it.
import { appendFileSync, readFileSync } from 'node:fs';
import { describeLeftovers, killLeftovers, processesWith } from './test-processes.mjs';
import { ownTmpdir, removeTmpdir } from './test-temp-dirs.mjs';

/** How long processes a test stopped get to finish ending (a service's last children after its stop resolved). */
const GRACE_MS = 10_000;
const POLL_MS = 100;

const owner = String(process.pid);
process.env.AGENT_RUNNER_TEST_OWNER = owner;
const tmp = ownTmpdir(process.env.AGENT_RUNNER_TEST_RUN ?? 'alone');

/**
 * CPU seconds of this process and of the processes it waited for, which waited for theirs (a
 * service, its worker, their QEMUs and sandboxes): what the file cost the machine.
 */
function cpuSeconds() {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const [utime, stime, cutime, cstime] = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .slice(11, 15)
    .map(Number);
  return (utime + stime + cutime + cstime) / CLOCK_TICKS;
}
/** USER_HZ, the unit of /proc's process times: 100 on every Linux architecture node runs on. */
const CLOCK_TICKS = 100;

process.on('exit', () => {
  // With the runner's timeline (scripts/run-test-files.mjs): what each file cost in CPU beside when it ran.
  const timeline = process.env.AGENT_RUNNER_TEST_TIMELINE;
  if (timeline) appendFileSync(timeline, `cpu ${cpuSeconds().toFixed(1)} ${process.argv[1]}\n`);
  // 'exit' allows no awaiting: a synchronous sleep between looks.
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + GRACE_MS;
  while (processesWith('AGENT_RUNNER_TEST_OWNER', owner).length > 0 && Date.now() < deadline) Atomics.wait(pause, 0, 0, POLL_MS);
  const left = killLeftovers('AGENT_RUNNER_TEST_OWNER', owner);
  removeTmpdir(tmp);
  if (left.length === 0) return;
  console.error(describeLeftovers(left, `of ${process.argv[1]}`));
  console.error(`# ${left.length} processes outlived their test file and were killed: a test must stop what it starts, pass or fail`);
  process.exitCode = 1;
});
