import { execFileWhenQuiet } from '../../util/fork-gate.js';
import { unmountLazily } from './tmpfs.js';

/**
 * Binds `source` read-only at `target` (root only). The bind is made, then remounted read-only;
 * if that fails the bind is undone, so a writable view of `source` is never left behind.
 */
export async function bindReadOnly(source: string, target: string): Promise<void> {
  await execFileWhenQuiet('/usr/bin/mount', ['--bind', source, target]);
  try {
    await execFileWhenQuiet('/usr/bin/mount', ['-o', 'remount,bind,ro,nosuid,nodev', target]);
  } catch (error) {
    await unmountLazily(target).catch(() => undefined);
    throw error;
  }
}
