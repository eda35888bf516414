import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import './suite-env.js';

/**
 * Gives a new machine's microVM cache the suite's warm snapshots, as hard links to the ones `npm
 * test` prepared (a restored VM maps its snapshot's memory copy-on-write: none is changed). For a
 * test whose subject is the guest image's build or a backend's state while it prepares, not the
 * snapshot after it, which is a cold boot under emulation: about 20 core-seconds a test.
 * A snapshot is named for the image it was taken of, so the cache's own image is still built,
 * and a snapshot of another image is never used.
 */
export function withSuiteSnapshots(cacheDir: string): void {
  const suite = join(process.env.AGENT_RUNNER_BACKENDS__MICROVM__CACHE_DIR!, 'snapshots');
  if (!existsSync(suite)) return;
  const whole = readdirSync(suite).filter((name) => existsSync(join(suite, name, 'complete')));
  mkdirSync(join(cacheDir, 'snapshots'), { recursive: true });
  for (const name of whole) execFileSync('cp', ['-al', join(suite, name), join(cacheDir, 'snapshots', name)]);
}
