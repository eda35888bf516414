import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { forkWhenQuiet } from './fork-gate.js';

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
    await unbind(target).catch(() => undefined);
    throw error;
  }
}

/** Lazy: a sandbox still running may hold the bind in its own mount namespace. */
export async function unbind(target: string): Promise<void> {
  await forkWhenQuiet(() => run('/usr/bin/umount', ['--lazy', target]));
}
