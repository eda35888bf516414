import { lchown, mkdir, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ownedName } from './owned-dirs.js';
import { mountTmpfs, unmountTmpfs } from './tmpfs.js';
import { removeTree } from './tree-removal.js';

export interface WorkDirLease {
  /** A fresh, empty directory owned by the job's uid, on a tmpfs of its own. */
  path: string;
  /** Deletes what the job left and returns the mount for the next job. */
  release(): Promise<void>;
}

/**
 * Size-limited tmpfs work directories, kept mounted between jobs: a mount and an unmount are
 * two forks of this (large) process per job, about a third of a short job's cost. A job never
 * sees the mount's root, only a fresh subdirectory made for it and deleted after it, so
 * nothing it leaves (files, modes, xattrs) reaches the next job. One job per mount at a time,
 * so the size limit is still per job.
 */
export class WorkDirPool {
  private readonly idle = new Map<number, string[]>();
  private disposed = false;

  constructor(
    private readonly root: string,
    private readonly maxIdle = 32,
  ) {}

  async lease(bytes: number, uid: number): Promise<WorkDirLease> {
    const mount = this.idle.get(bytes)?.pop() ?? (await this.mountNew(bytes));
    const path = join(mount, 'work');
    try {
      await mkdir(path, { mode: 0o755 });
      await lchown(path, uid, uid);
    } catch (error) {
      await this.retire(mount);
      throw error;
    }
    return { path, release: () => this.giveBack(bytes, mount, path) };
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
    await mountTmpfs(mount, bytes);
    return mount;
  }

  private async giveBack(bytes: number, mount: string, path: string): Promise<void> {
    try {
      // rm never follows symlinks: links the job planted are removed, not their targets.
      await removeTree(path);
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
    await unmountTmpfs(mount).catch(() => undefined);
    await rmdir(mount).catch(() => undefined);
  }
}
