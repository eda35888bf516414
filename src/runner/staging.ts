import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ownedName, reapDeadOwners } from '../isolation/host/owned-dirs.js';

/**
 * A job's host-side scratch directory (the compiler's output directory), readable by the
 * unprivileged sandbox uid, removed when the job ends.
 */
export class JobStaging {
  private constructor(readonly dir: string) {}

  static async create(stagingRoot: string): Promise<JobStaging> {
    await mkdir(stagingRoot, { recursive: true, mode: 0o755 });
    const dir = join(stagingRoot, ownedName());
    await mkdir(dir, { mode: 0o755 });
    return new JobStaging(dir);
  }

  async makeDir(name: string): Promise<string> {
    const path = join(this.dir, name);
    await mkdir(path, { mode: 0o755 });
    return path;
  }

  /** Removes staging left by processes that died (crash, SIGKILL). */
  static reapOrphans(stagingRoot: string): Promise<number> {
    return reapDeadOwners(stagingRoot);
  }

  /** rm never follows symlinks, so links a job planted are removed, not their targets. */
  async dispose(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
