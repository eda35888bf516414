import { readFile } from 'node:fs/promises';
import { execFileWhenQuiet } from '../../util/fork-gate.js';

/** A size-limited tmpfs (root only): a job filling it fills nothing else. */
export async function mountTmpfs(path: string, bytes: number): Promise<void> {
  await execFileWhenQuiet('/usr/bin/mount', ['-t', 'tmpfs', '-o', `size=${bytes},mode=0755,nosuid,nodev`, 'agent-runner-work', path]);
}

/** Any of our mounts. Lazy: the job's processes are gone, but a reader of ours may still hold an fd inside. */
export async function unmountLazily(path: string): Promise<void> {
  await execFileWhenQuiet('/usr/bin/umount', ['--lazy', path]);
}

/** The mount points beneath `root` in this process's mount namespace, deepest first (the order to unmount them in). */
export async function mountPointsUnder(root: string): Promise<string[]> {
  const mounts = await readFile('/proc/self/mounts', 'utf8').catch(() => '');
  return (
    mounts
      .split('\n')
      // The kernel writes a space, tab, newline or backslash in a path as an octal escape.
      .map((line) => line.split(' ')[1]?.replace(/\\([0-7]{3})/g, (_escape, octal: string) => String.fromCharCode(parseInt(octal, 8))))
      .filter((mountPoint): mountPoint is string => mountPoint?.startsWith(`${root}/`) === true)
      .reverse()
  );
}

/** Unmounts what processes that died left mounted under `root` (their dirs are then reaped). */
export async function unmountOrphans(root: string, isOwnerAlive: (pid: number) => boolean): Promise<void> {
  for (const mountPoint of await mountPointsUnder(root)) {
    const owner = Number(mountPoint.slice(root.length + 1).split('-')[0]);
    if (!Number.isInteger(owner) || owner <= 0 || isOwnerAlive(owner)) continue;
    // A disk its owner froze to copy it (and died meanwhile) would hold its writers for ever.
    await execFileWhenQuiet('/usr/sbin/fsfreeze', ['--unfreeze', mountPoint]).catch(() => undefined);
    await unmountLazily(mountPoint).catch(() => undefined);
  }
}
