import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/**
 * Writes a file so that readers, and a crash at any instant, see either the old content or
 * the new, never a torn one: write a temp file beside it, fsync it, rename over, fsync the dir.
 * Several files renamed into one directory can share the last one's directory fsync
 * (`syncDir: false` before it): the journal commits renames in order.
 */
export async function writeFileAtomic(path: string, content: string | Buffer, options: { syncDir?: boolean; mode?: number } = {}): Promise<void> {
  const temp = join(dirname(path), `.${randomBytes(6).toString('hex')}.tmp`);
  // Private by default (0600): the rename keeps the temp file's mode.
  const handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, options.mode ?? 0o600);
  try {
    try {
      await handle.writeFile(content);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  } catch (error) {
    // A write that failed (a full disk) leaves no temp file holding what space it got.
    await rm(temp, { force: true });
    throw error;
  }
  if (options.syncDir === false) return;
  const dir = await open(dirname(path), constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
