// Each test file's process gets a temp dir of its own (TMPDIR, which node's os.tmpdir() and the
// services, CLIs and sandboxes it starts read), removed when the file ends: what a test makes under
// the temp dir (workspaces, stores, sockets) never piles up across runs. What is shared between
// files stays in the suite's temp dir, AGENT_RUNNER_SUITE_TMPDIR (the temp dir the run started
// with): the suite's state dir and the machine-wide slots.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The temp dir the run started with: where what files share lives. */
export function suiteTmpdir() {
  return process.env.AGENT_RUNNER_SUITE_TMPDIR ?? tmpdir();
}

const PREFIX = 'agent-runner-test-tmp-';

/** Makes this process's own temp dir (named by the run) and points TMPDIR at it; returns it. */
export function ownTmpdir(run) {
  process.env.AGENT_RUNNER_SUITE_TMPDIR ??= tmpdir();
  const dir = mkdtempSync(join(suiteTmpdir(), `${PREFIX}${run}-${process.pid}-`));
  // Sandboxes run as other uids and must reach the files tests stage under it.
  chmodSync(dir, 0o755);
  process.env.TMPDIR = dir;
  return dir;
}

/** Removes `dir` without crossing into a file system mounted under it (a mount a killed sandbox left). */
export function removeTmpdir(dir) {
  spawnSync('rm', ['-rf', '--one-file-system', dir], { stdio: 'ignore' });
}

/** The temp dirs of files of `run` still there (their process was killed before it could remove them); removes them. */
export function sweepTmpdirs(run) {
  const left = readdirSync(suiteTmpdir()).filter((name) => name.startsWith(`${PREFIX}${run}-`));
  for (const name of left) removeTmpdir(join(suiteTmpdir(), name));
  return left;
}
