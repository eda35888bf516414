import { lchown } from 'node:fs/promises';
import { join } from 'node:path';
import { WorkDirPool, type LeaseOptions, type WorkDirLease } from './host/work-dir-pool.js';
import type { SandboxTemplate } from './types.js';

const DEFAULT_WORK_DIR_BYTES = 1024 * 1024 * 1024;

/**
 * What a backend of host-directory sandboxes (HostDirSandbox) keeps across its jobs: the pool
 * their work dirs are leased from, and the cleanups still owed. Dispose waits for every owed
 * cleanup, so a work dir is back in the pool (emptied) before the pool's mounts go.
 */
export class HostDirJobs {
  private readonly workDirs: WorkDirPool;
  private readonly cleaningUp = new Set<Promise<void>>();

  /** Work dirs are mounted under `runtimeDir`/workdirs. */
  constructor(runtimeDir: string) {
    this.workDirs = new WorkDirPool(join(runtimeDir, 'workdirs'));
  }

  /**
   * A fresh work dir owned by `uid`, on a file system of the template's size (with `withLayer`,
   * its root's writable layer beside it); or the disk the template was kept on (fromDisk).
   */
  leaseWorkDir(template: SandboxTemplate, uid: number, options: Omit<LeaseOptions, 'from'> = {}): Promise<WorkDirLease> {
    return this.workDirs.lease(template.workDirBytes ?? DEFAULT_WORK_DIR_BYTES, uid, { ...options, ...(template.fromDisk && { from: template.fromDisk }) });
  }

  /** Writable mounts belong to the job's uid for the job's lifetime. */
  async handWritableMounts(template: SandboxTemplate, uid: number): Promise<void> {
    for (const mount of template.mounts) if (mount.writable) await lchown(mount.host, uid, uid);
  }

  /**
   * Counts one sandbox's cleanup as owed until the function returned is called: by the
   * sandbox's onFinished, or by its launch when that fails.
   */
  oweCleanup(): () => void {
    let settle!: () => void;
    const cleanedUp = new Promise<void>((resolve) => (settle = resolve));
    this.cleaningUp.add(cleanedUp);
    return () => {
      this.cleaningUp.delete(cleanedUp);
      settle();
    };
  }

  /** Waits until every sandbox has cleaned up, then unmounts the idle work dirs. */
  async dispose(): Promise<void> {
    await Promise.all(this.cleaningUp);
    await this.workDirs.dispose();
  }
}
