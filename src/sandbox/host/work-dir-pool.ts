import { lchown, mkdir, rm, rmdir, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { ownedName } from './owned-dirs.js';
import { mountScratchDisk } from './scratch-disk.js';
import { mountTmpfs, unmountLazily } from './tmpfs.js';
import { removeTree } from './tree-removal.js';

/** statfs(2) magic numbers of tmpfs and ramfs: an image there would be memory too. */
const IN_MEMORY_FILE_SYSTEMS = new Set([0x01021994, 0x858458f6]);

export interface WorkDirLease {
  /** A fresh, empty directory owned by the job's uid, on a size-limited file system of its own. */
  path: string;
  /** With `withLayer`: a second one beside it, root's, for the writable layer of the job's root (SandboxTemplate.writableRoot). */
  layer?: string;
  /** Deletes what the job left and returns the mount for the next job. */
  release(): Promise<void>;
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
  private disposed = false;
  /** Whether work dirs are scratch disks: not where the root is in memory anyway (a microVM's guest), nor once one failed to mount. */
  private onDisk: Promise<boolean> | undefined;

  constructor(
    private readonly root: string,
    private readonly maxIdle = 32,
  ) {}

  async lease(bytes: number, uid: number, withLayer = false): Promise<WorkDirLease> {
    const mount = this.idle.get(bytes)?.pop() ?? (await this.mountNew(bytes));
    const path = join(mount, 'work');
    const layer = withLayer ? join(mount, 'layer') : undefined;
    try {
      await mkdir(path, { mode: 0o755 });
      await lchown(path, uid, uid);
      if (layer) await mkdir(layer, { mode: 0o700 });
    } catch (error) {
      await this.retire(mount);
      throw error;
    }
    return { path, ...(layer && { layer }), release: () => this.giveBack(bytes, mount, [path, ...(layer ? [layer] : [])]) };
  }

  /** Unmounts the idle mounts; leased ones are unmounted when they come back. */
  async dispose(): Promise<void> {
    this.disposed = true;
    const mounts = [...this.idle.values()].flat();
    this.idle.clear();
    await Promise.all(mounts.map((mount) => this.retire(mount)));
  }

  private async mountNew(bytes: number): Promise<string> {
    const mount = join(this.root, ownedName());
    await mkdir(mount, { recursive: true, mode: 0o755 });
    this.onDisk ??= statfs(this.root).then(({ type }) => !IN_MEMORY_FILE_SYSTEMS.has(type));
    if (await this.onDisk) {
      try {
        await mountScratchDisk(mount, imageOf(mount), bytes);
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
