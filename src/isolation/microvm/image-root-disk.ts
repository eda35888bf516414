import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execFileWhenQuiet } from '../../util/fork-gate.js';
import { ownedName, reapDeadOwners } from '../host/owned-dirs.js';
import { removeTree } from '../host/tree-removal.js';
import { SandboxUnavailableError } from '../types.js';
import { openedByAnyProcess } from './image-cache.js';

/** A root disk's name: the hash of the layers it was made of. */
const DISK_KEY = /^[0-9a-f]{24}$/;
const MKE2FS_PATH = '/usr/sbin/mke2fs';

/**
 * Made in a mount namespace of its own, so the host never sees the mount: the overlay of the
 * layers (top first, read-only: the image as its sandboxes see it, whiteouts applied), then an
 * ext4 file system of exactly that tree, sized from it. ext4 because the guest's kernel (Debian's
 * 6.1) idmaps ext4 mounts and not squashfs ones, and the guest maps the image's ids to a block of
 * its own as the host does. No journal and no checksums (the guest mounts it read-only, and
 * verifies nothing it could act on), room for every inode and a tenth more than the blocks in use.
 */
const MAKE_DISK = `set -e
mount -t overlay -o ro,lowerdir="$1" agent-runner-image "$2"
used=$(du -s -x -B1 "$2" | cut -f1)
inodes=$(find "$2" -xdev | wc -l)
kib=$(( (used + used / 10 + inodes * 512) / 1024 + 65536 ))
"$4" -q -F -t ext4 -b 4096 -I 256 -m 0 -N $(( inodes + inodes / 10 + 1024 )) -O ^has_journal,^metadata_csum,^resize_inode -E root_owner=0:0 -d "$2" "$3" "\${kib}k"`;

/**
 * The root disk of an image for microVMs: its layers (image store directories, bottom first)
 * made one read-only ext4 file, built once and kept under `dir` by the hash of the layers (the
 * store names each by its digest), shared by every VM of every template on those layers. A disk
 * is renamed into place whole, so a builder that died leaves only its own staging (reaped by the
 * next build). Disks whose layers have left the store go once no process has them open. A disk
 * over `maxBytes` (what a VM's drive for it holds) is refused when made, and never kept.
 */
export async function imageRootDisk(dir: string, layers: readonly string[], maxBytes: number, signal?: AbortSignal): Promise<string> {
  const key = createHash('sha256').update(layers.join('\n')).digest('hex').slice(0, 24);
  const disk = join(dir, `${key}.ext4`);
  if (existsSync(disk)) return disk;
  const building = join(dir, 'building');
  await mkdir(building, { recursive: true, mode: 0o700 });
  await reapDeadOwners(building);
  const staging = join(building, ownedName());
  await mkdir(join(staging, 'merged'), { recursive: true, mode: 0o700 });
  try {
    // An overlay of one lower needs a second: an empty one beneath the image.
    await mkdir(join(staging, 'empty'));
    const lowers = [...layers].reverse().concat(join(staging, 'empty'));
    await execFileWhenQuiet(
      '/usr/bin/unshare',
      ['--mount', '--propagation', 'private', '/bin/sh', '-c', MAKE_DISK, 'sh', lowers.join(':'), join(staging, 'merged'), join(staging, 'disk.ext4'), MKE2FS_PATH],
      { ...(signal && { signal }) },
    ).catch((error: Error & { stderr?: string }) => {
      if (signal?.aborted) throw signal.reason;
      throw new SandboxUnavailableError(`the image's root disk for the microVM could not be made: ${error.stderr?.trim() || error.message}`);
    });
    if ((await stat(join(staging, 'disk.ext4'))).size > maxBytes)
      throw new SandboxUnavailableError(`the image's root disk is over ${maxBytes} bytes, the most a microVM's image slot holds: run it on local_process`);
    await writeFile(join(dir, `${key}.layers.json`), `${JSON.stringify(layers)}\n`);
    await rename(join(staging, 'disk.ext4'), disk);
  } finally {
    await removeTree(staging);
  }
  await pruneRootDisks(dir).catch(() => undefined);
  return disk;
}

/** Removes the disks whose layers are not all in the store any more, and that no process has open. */
export async function pruneRootDisks(dir: string): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(dir).catch(() => [])) {
    const key = /^(.+)\.layers\.json$/.exec(name)?.[1];
    if (key === undefined || !DISK_KEY.test(key)) continue;
    const layers = JSON.parse(await readFile(join(dir, name), 'utf8')) as string[];
    const disk = join(dir, `${key}.ext4`);
    if (layers.every((layer) => existsSync(layer)) || openedByAnyProcess([disk])) continue;
    await rm(disk, { force: true });
    await rm(join(dir, name), { force: true });
    removed.push(key);
  }
  return removed;
}
