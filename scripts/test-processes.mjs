// What the test suite started, found by the environment every process of ours inherits: each run
// exports AGENT_RUNNER_TEST_RUN (scripts/run-tests.sh), each test file's process sets
// AGENT_RUNNER_TEST_OWNER to its own pid (scripts/test-process-owner.mjs), and the services, CLIs,
// QEMUs and runsc processes a test starts carry both down. Processes of another run of the suite on
// the same machine carry other values and are never touched.
//
//   node scripts/test-processes.mjs sweep   ends the processes of this run (AGENT_RUNNER_TEST_RUN)
//                                           still alive, naming each; exits 1 when there were any
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sweepTmpdirs } from './test-temp-dirs.mjs';

/** Processes (other than this one) whose environment has `name=value`, with their command lines. */
export function processesWith(name, value) {
  const wanted = `${name}=${value}`;
  const found = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (!readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(wanted)) continue;
      const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
      // A zombie has no command line: it is gone but for its parent's wait.
      if (command !== '') found.push({ pid, command });
    } catch {
      // Gone while we looked, or a kernel thread.
    }
  }
  return found;
}

/** Kills what is left of `name=value` with SIGKILL and returns what there was. */
export function killLeftovers(name, value) {
  const left = processesWith(name, value);
  for (const { pid } of left) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
  return left;
}

/** One line per leftover, for the run's output. */
export function describeLeftovers(left, where) {
  return left.map(({ pid, command }) => `# leftover ${where}: pid ${pid}: ${command.slice(0, 300)}`).join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === 'sweep') {
  const run = process.env.AGENT_RUNNER_TEST_RUN;
  if (!run) {
    console.error('scripts/test-processes.mjs sweep: AGENT_RUNNER_TEST_RUN is not set');
    process.exit(2);
  }
  const left = killLeftovers('AGENT_RUNNER_TEST_RUN', run);
  // Those of files killed at their deadline, which could not remove theirs.
  sweepTmpdirs(run);
  if (left.length > 0) {
    console.log(describeLeftovers(left, 'of the run'));
    console.log(`# leftovers: ${left.length} processes of this run outlived it and were killed`);
    process.exit(1);
  }
}
