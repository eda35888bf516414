import { randomBytes } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isAlive } from './process-tree.js';
import { mountPointsUnder } from './tmpfs.js';

/**
 * Scratch directories are named after the process that made them, so that after a crash the
 * next process can tell an orphan (owner gone) from a live job's directory.
 */
export function ownedName(): string {
  return `${process.pid}-${randomBytes(6).toString('hex')}`;
}

/** The owner of a name ownedName() made: the pid before its first '-'. */
const ownedNameOwner = (name: string): number => Number(name.split('-')[0]);

/**
 * Removes directories (and files: a work dir's disk image) under `root` whose owning process no
 * longer exists; returns how many. One that cannot be removed now (something still mounted in
 * it, which its owner's reaper unmounts: never walked into) is left for a later pass: an orphan is never a
 * reason for the backend to be unavailable. `ownerOf` reads the owner's pid from a name (NaN:
 * not an owned entry, left alone); by default, as ownedName() writes it.
 */
export async function reapDeadOwners(root: string, ownerOf: (name: string) => number = ownedNameOwner): Promise<number> {
  let reaped = 0;
  for (const entry of await readdir(root, { withFileTypes: true }).catch(() => [])) {
    const owner = ownerOf(entry.name);
    if (!Number.isInteger(owner) || owner <= 0 || isAlive(owner)) continue;
    const path = join(root, entry.name);
    // Never walked into what is still mounted in it (a dead VM's volume binds: rm -r would remove the volume's files).
    if ((await mountPointsUnder(path)).length > 0) continue;
    try {
      await rm(path, { recursive: true, force: true });
      reaped += 1;
    } catch {
      // Left for the next pass.
    }
  }
  return reaped;
}
