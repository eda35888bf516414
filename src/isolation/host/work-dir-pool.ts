import { lchown, link, lstat, mkdir, readFile, rename, rm, rmdir, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { IMAGE_ROOT_HELPER } from '../../images/image-root.js';
import { writeFileAtomic } from '../../util/atomic-write.js';
import { execFileWhenQuiet } from '../../util/fork-gate.js';
import type { IdRange } from '../../util/id-ranges.js';
import { ownedName } from './owned-dirs.js';
import { mountDisk, mountScratchDisk } from './scratch-disk.js';
import { mountTmpfs, unmountLazily } from './tmpfs.js';
import { removeTree } from './tree-removal.js';

/** statfs(2) magic numbers of tmpfs and ramfs: an image there would be memory too. */
const IN_MEMORY_FILE_SYSTEMS = new Set([0x01021994, 0x858458f6]);
/** Tries of a kept disk's unmount: a host reader (an artifact, a statfs) may hold it a moment after the job's processes are gone. */
const UNMOUNT_TRIES = 20;

export interface WorkDirLease {
  /** A fresh, empty directory owned by the job's uid, on a size-limited file system of its own. */
  path: string;
  /** With `withLayer`: a second one beside it, root's, for the writable layer of the job's root (SandboxTemplate.writableRoot). */
  layer?: string;
  /** Deletes what the job left and returns the mount for the next job. */
  release(): Promise<void>;
  /** Only a lease with `ids` on a disk of its own, not a tmpfs: what is done with that disk. */
  disk?: LeasedDisk;
}

/** A leased work dir's disk (WorkDirLease.disk). */
export interface LeasedDisk {
  /**
   * Instead of release, once the job's processes are gone: the disk (the work dir and the layer
   * as the job left them) unmounted and moved to `image`, the file a later lease takes up
   * (LeaseOptions.from), the host ids its files are owned by beside it (`<image>.ids`). If it
   * fails, abandon() the lease.
   */
  keep(image: string): Promise<void>;
  /** After a keep that failed: the disk let go of, never emptied (its image is reaped with this process's other leftovers). */
  abandon(): Promise<void>;
  /** While the job runs: a copy of its disk at `image`, of one instant (its file system frozen meanwhile). */
  copy(image: string): Promise<void>;
}

export interface LeaseOptions {
  /** A second directory for the writable layer of the job's root (WorkDirLease.layer). */
  withLayer?: boolean;
  /** The job's ids (inside -> host): a lease that knows them can be kept (WorkDirLease.keep) and taken up by a job with others. */
  ids?: readonly IdRange[];
  /**
   * A disk kept before (WorkDirLease.keep, copy) to take up, its files as they were: linked
   * (`take`: its keeper lets it go once the job runs) or copied; its files shown as owned by
   * this job's ids (an idmapped view).
   */
  from?: { image: string; take: boolean };
}

/**
 * Size-limited work directories (scratch-disk.ts: ext4 on a loop device; a tmpfs where the host
 * has no loop devices or mkfs.ext4), kept mounted between jobs: making and unmounting one costs
 * forks of this (large) process, more than a short job's own run. A job never
 * sees the mount's root, only a fresh subdirectory made for it and deleted after it, so
 * nothing it leaves (files, modes, xattrs) reaches the next job. One job per mount at a time,
 * so the size limit is still per job.
 */
export class WorkDirPool {
  private readonly idle = new Map<number, string[]>();
  /** The mounts that are disks (scratch-disk.ts) of an image beside them, not tmpfs. */
  private readonly disks = new Set<string>();
  /** A taken-up disk's mount -> its idmapped view (takeUp). */
  private readonly views = new Map<string, string>();
  private disposed = false;
  /** Whether work dirs are scratch disks: not where the root is in memory anyway (a microVM's guest), nor once one failed to mount. */
  private onDisk: Promise<boolean> | undefined;

  constructor(
    private readonly root: string,
    private readonly maxIdle = 32,
  ) {}

  async lease(bytes: number, uid: number, options: LeaseOptions = {}): Promise<WorkDirLease> {
    const { withLayer = false, ids, from } = options;
    // A disk taken up keeps the ids its files were written with (diskIds); the job sees them as
    // its own through an idmapped view of it, where they differ.
    const taken = from ? await this.takeUp(from, ids ?? []) : null;
    const mount = taken?.mount ?? this.idle.get(bytes)?.pop() ?? (await this.mountNew(bytes));
    const diskIds = taken?.diskIds ?? ids;
    const seen = taken?.view ?? mount;
    const path = join(seen, 'work');
    const layer = withLayer ? join(seen, 'layer') : undefined;
    try {
      if (!from) {
        await mkdir(path, { mode: 0o755 });
        await lchown(path, uid, uid);
      }
      if (layer && !(from && (await isDirectory(layer)))) await mkdir(layer, { mode: 0o700 });
    } catch (error) {
      await this.retire(mount);
      throw error;
    }
    // A disk taken up is the job's own, not of the size asked: it is not pooled, nor emptied (its
    // image may be a paused state's still, if the job failed to start).
    const release = () => (from ? this.retire(mount) : this.giveBack(bytes, mount, [path, ...(layer ? [layer] : [])]));
    return {
      path,
      ...(layer && { layer }),
      release,
      ...(diskIds !== undefined &&
        this.disks.has(mount) && {
          disk: {
            keep: async (image: string) => {
              await writeFileAtomic(idsOf(image), JSON.stringify(diskIds));
              // Not lazily: the image is whole, and no mount of it is left, before it moves.
              for (const point of [...(taken?.view ? [taken.view] : []), mount]) await unmountWhole(point);
              this.disks.delete(mount);
              this.views.delete(mount);
              await moveFile(imageOf(mount), image);
              await rmdir(mount);
              if (taken?.view) await rmdir(taken.view);
            },
            abandon: async () => {
              this.disks.delete(mount);
              await this.unmountView(mount);
              await unmountLazily(mount).catch(() => undefined);
              await rmdir(mount).catch(() => undefined);
            },
            copy: async (image: string) => {
              await writeFileAtomic(idsOf(image), JSON.stringify(diskIds));
              // Frozen, its file system is whole on the image and takes no write until thawed.
              await execFileWhenQuiet('/usr/sbin/fsfreeze', ['--freeze', mount]);
              try {
                await copySparse(imageOf(mount), image);
              } finally {
                await execFileWhenQuiet('/usr/sbin/fsfreeze', ['--unfreeze', mount]);
              }
            },
          },
        }),
    };
  }

  /** Unmounts the idle mounts; leased ones are unmounted when they come back. */
  async dispose(): Promise<void> {
    this.disposed = true;
    const mounts = [...this.idle.values()].flat();
    this.idle.clear();
    await Promise.all(mounts.map((mount) => this.retire(mount)));
  }

  /**
   * A kept disk mounted as a lease's: linked where the pool keeps its images, or copied there;
   * its files stay owned by the ids it was kept with (`diskIds`), shown as the job's own `ids`
   * through an idmapped view of it (`view`, image-root idmap) where those differ. Nothing of the
   * tree is walked or changed, whatever it holds.
   */
  private async takeUp(from: NonNullable<LeaseOptions['from']>, ids: readonly IdRange[]): Promise<{ mount: string; view?: string; diskIds: IdRange[] }> {
    const mount = join(this.root, ownedName());
    await mkdir(mount, { recursive: true, mode: 0o755 });
    try {
      const diskIds = JSON.parse(await readFile(idsOf(from.image), 'utf8')) as IdRange[];
      const linked =
        from.take &&
        (await link(from.image, imageOf(mount)).then(
          () => true,
          () => false,
        ));
      if (!linked) await copySparse(from.image, imageOf(mount));
      await mountDisk(imageOf(mount), mount);
      this.disks.add(mount);
      const moved = diskIds.map((kept) => ({ kept, now: ids.find((range) => range.inside === kept.inside && range.count === kept.count) }));
      if (moved.every(({ kept, now }) => now === undefined || now.host === kept.host)) return { mount, diskIds };
      // Every id the disk's files have, those that stay the same too: an idmapped mount shows an
      // id its map leaves out as no one's (a copy whose user got the kept user's uid back, its
      // root another, saw its own files as nobody's and could not open them).
      const map = moved.flatMap(({ kept, now }) => (now ? [`${kept.host}:${now.host}:${kept.count}`] : []));
      const view = join(this.root, ownedName());
      await mkdir(view, { mode: 0o755 });
      this.views.set(mount, view);
      // The host's root (lost+found, the layer's own directories) stays root through the view.
      await execFileWhenQuiet(IMAGE_ROOT_HELPER, ['idmap', mount, view, '--map', [...map, '0:0:1'].join(',')]);
      return { mount, view, diskIds };
    } catch (error) {
      await this.retire(mount);
      throw error;
    }
  }

  private async unmountView(mount: string): Promise<void> {
    const view = this.views.get(mount);
    if (view === undefined) return;
    this.views.delete(mount);
    await unmountLazily(view).catch(() => undefined);
    await rmdir(view).catch(() => undefined);
  }

  private async mountNew(bytes: number): Promise<string> {
    const mount = join(this.root, ownedName());
    await mkdir(mount, { recursive: true, mode: 0o755 });
    this.onDisk ??= statfs(this.root).then(({ type }) => !IN_MEMORY_FILE_SYSTEMS.has(type));
    if (await this.onDisk) {
      try {
        await mountScratchDisk(mount, imageOf(mount), bytes);
        this.disks.add(mount);
        return mount;
      } catch {
        await rm(imageOf(mount), { force: true });
        // Tried once: a host without loop devices (a container) keeps the tmpfs, whose pages count as the job's memory.
        this.onDisk = Promise.resolve(false);
      }
    }
    await mountTmpfs(mount, bytes);
    return mount;
  }

  private async giveBack(bytes: number, mount: string, paths: readonly string[]): Promise<void> {
    try {
      // rm never follows symlinks: links the job planted are removed, not their targets.
      for (const path of paths) await removeTree(path);
    } catch {
      await this.retire(mount);
      return;
    }
    const list = this.idle.get(bytes) ?? [];
    if (this.disposed || list.length >= this.maxIdle) {
      await this.retire(mount);
      return;
    }
    list.push(mount);
    this.idle.set(bytes, list);
  }

  private async retire(mount: string): Promise<void> {
    this.disks.delete(mount);
    await this.unmountView(mount);
    await unmountLazily(mount).catch(() => undefined);
    await rmdir(mount).catch(() => undefined);
    // The loop device lets go of an unlinked image once the lazy unmount completes.
    await rm(imageOf(mount), { force: true });
  }
}

/** Beside its mount point, named after the same owner, so a dead process's images are reaped with its dirs. */
function imageOf(mount: string): string {
  return `${mount}.img`;
}

/** Whether `path` is a directory, not a link to one. */
async function isDirectory(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => null))?.isDirectory() === true;
}

/** A file moved within the host's disk; copied then removed where the two places are different file systems. */
async function moveFile(from: string, to: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
    await copySparse(from, to);
    await rm(from, { force: true });
  }
}

/** A disk image copied as sparse as it is: only the blocks its file system wrote are read and written. */
async function copySparse(from: string, to: string): Promise<void> {
  await execFileWhenQuiet('/usr/bin/cp', ['--sparse=always', '--no-dereference', from, to]);
}

/** Where the host ids a kept disk's files are owned by are written, beside its image (out of the job's reach, and of its full disk). */
function idsOf(image: string): string {
  return `${image}.ids`;
}

/** Unmounts a disk whole (not lazily), trying again while a host reader still holds it. */
async function unmountWhole(mount: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await execFileWhenQuiet('/usr/bin/umount', [mount]);
      return;
    } catch (error) {
      if (attempt >= UNMOUNT_TRIES) throw error;
      await sleep(10 * attempt);
    }
  }
}
