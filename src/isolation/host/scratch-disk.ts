import { truncate, writeFile } from 'node:fs/promises';
import { execFileWhenQuiet } from '../../util/fork-gate.js';

/**
 * A size-limited file system on the host's disk (root only): ext4 in a sparse image file,
 * mounted through a loop device. A job's work dir is one, not a tmpfs: tmpfs pages are charged
 * to the memory cgroup of the process that writes them and cannot be reclaimed, so a job
 * filling a work dir larger than its memory was OOM-killed before the file system was full.
 * Page cache is reclaimable (written back under the cgroup's pressure): the job's memory
 * limit and its work dir's size are independent, and a full work dir answers ENOSPC.
 * No journal (scratch, never recovered); `discard` gives deleted files' blocks back to the host.
 */
export async function mountScratchDisk(path: string, image: string, bytes: number): Promise<void> {
  await makeDisk(image, bytes, { journal: false });
  await mountDisk(image, path);
}

/**
 * An empty ext4 file system in a new sparse image of `bytes`: a journal where it must survive
 * its holder's death (a volume, mounted while sandboxes write it), and its top directory owned
 * by `rootOwner` (uid:gid) where not root's.
 */
export async function makeDisk(image: string, bytes: number, options: { journal: boolean; rootOwner?: string }): Promise<void> {
  await writeFile(image, '', { mode: 0o600, flag: 'wx' });
  await truncate(image, bytes);
  const extended = ['nodiscard', ...(options.rootOwner ? [`root_owner=${options.rootOwner}`] : [])].join(',');
  await execFileWhenQuiet('/usr/sbin/mkfs.ext4', ['-q', '-F', '-m', '0', ...(options.journal ? [] : ['-O', '^has_journal']), '-E', extended, image]);
}

/** An image made by mountScratchDisk (a kept one, taken up again) mounted at `path`. */
export async function mountDisk(image: string, path: string): Promise<void> {
  await execFileWhenQuiet('/usr/bin/mount', ['-t', 'ext4', '-o', 'loop,nosuid,nodev,discard', image, path]);
}
