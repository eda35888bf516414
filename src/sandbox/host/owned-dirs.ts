import { randomBytes } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isAlive } from './process-tree.js';

/**
 * Scratch directories are named after the process that made them, so that after a crash the
 * next process can tell an orphan (owner gone) from a live job's directory.
 */
export function ownedName(): string {
  return `${process.pid}-${randomBytes(6).toString('hex')}`;
}

/**
 * Removes directories (and files: a work dir's disk image) under `root` whose owning process no
 * longer exists; returns how many. One that cannot be removed now (still a mount point: EBUSY,
 * while another process's reaper unmounts it) is left for a later pass: an orphan is never a
 * reason for the backend to be unavailable.
 */
export async function reapDeadOwners(root: string): Promise<number> {
  let reaped = 0;
  for (const entry of await readdir(root, { withFileTypes: true }).catch(() => [])) {
    const owner = Number(entry.name.split('-')[0]);
    if (!Number.isInteger(owner) || owner <= 0 || isAlive(owner)) continue;
    try {
      await rm(join(root, entry.name), { recursive: true, force: true });
      reaped += 1;
    } catch {
      // Left for the next pass.
    }
  }
  return reaped;
}
