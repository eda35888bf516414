import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * One state dir for the whole suite: the rust toolchain mirror and compile cache survive
 * between files (tests that need a cold cache use code no other test uses). It is in the temp
 * dir the run started with, not the file's own (scripts/test-temp-dirs.mjs).
 */
export const TEST_STATE_DIR = join(process.env.AGENT_RUNNER_SUITE_TMPDIR ?? tmpdir(), 'agent-runner-test-state');

// The microVM guest image and its snapshot are built once for the whole suite, by `npm test`'s
// preparation step before the tests (test/prepare-suite.ts), whatever state dir a test (or
// the server and CLIs it spawns, which inherit this) runs with.
process.env.AGENT_RUNNER_BACKENDS__MICROVM__CACHE_DIR ??= join(TEST_STATE_DIR, 'microvm-cache');
// One VM kept ready, not the default two: a test's jobs come one after another, and each VM the
// pool restored and nobody took (the second, in nearly every file and service) cost about a
// core-second of emulation, some 60 a run. A job that finds none restores one for itself.
process.env.AGENT_RUNNER_BACKENDS__MICROVM__WARM_POOL_SIZE ??= '1';

/**
 * The environment of a process of ours a test starts (a service, the MCP server, a CLI): the
 * suite's state dir, and kept sandbox states of its own. One service per kept dir: two
 * services loading one dir would each list (and could resume) the other's paused sandboxes.
 */
export function processEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  mkdirSync(TEST_STATE_DIR, { recursive: true, mode: 0o755 });
  const kept = mkdtempSync(join(tmpdir(), 'kept-'));
  if (keptDirs.push(kept) === 1) process.once('exit', () => keptDirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
  return { ...process.env, AGENT_RUNNER_STATE_DIR: TEST_STATE_DIR, AGENT_RUNNER_SANDBOXES__KEPT_DIR: kept, ...extra };
}

/** Removed when the test process exits: its services are gone by then. */
const keptDirs: string[] = [];
