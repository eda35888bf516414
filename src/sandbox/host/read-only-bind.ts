import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { forkWhenQuiet } from './fork-gate.js';
import { unmountLazily } from './tmpfs.js';

const run = promisify(execFile);

/**
 * Binds `source` read-only at `target` (root only). The bind is made, then remounted read-only;
 * if that fails the bind is undone, so a writable view of `source` is never left behind.
 */
export async function bindReadOnly(source: string, target: string): Promise<void> {
  await forkWhenQuiet(() => run('/usr/bin/mount', ['--bind', source, target]));
  try {
    await forkWhenQuiet(() => run('/usr/bin/mount', ['-o', 'remount,bind,ro,nosuid,nodev', target]));
  } catch (error) {
    await unmountLazily(target).catch(() => undefined);
    throw error;
  }
}
