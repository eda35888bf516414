import { mkdir, readdir, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ownedName } from '../isolation/host/owned-dirs.js';
import { isAlive } from '../isolation/host/process-tree.js';
import { bindReadOnly } from '../isolation/host/read-only-bind.js';
import { unmountLazily, unmountOrphans } from '../isolation/host/tmpfs.js';
import { isWorldReachable } from './resolve.js';

/**
 * Toolchains installed under a private home (rustup in /root, mode 0700): the sandboxes run as
 * unprivileged uids that cannot search that home, so such an install is bound read-only at a
 * reachable mount point under the state dir, from where it is. Nothing is copied (a rust
 * toolchain is 1.4 GB in 50,000 files), and nothing is done before a job needs the toolchain.
 * The binds are this process's (named after its pid): unmounted on dispose, and those of a
 * process that died are unmounted by the next one that binds.
 */
export class PrivateToolchains {
  private readonly binds = new Map<string, Promise<string>>();
  private reaped: Promise<void> | undefined;

  /** `root`: the directory the mount points live in. */
  constructor(private readonly root: string) {}

  /** A host path of the install that the sandboxes' uids can reach. */
  reachable(installRoot: string, name: string): Promise<string> {
    // Without root the sandboxes run as our own uid, which reaches what we resolved.
    if (isWorldReachable(installRoot) || process.getuid?.() !== 0) return Promise.resolve(installRoot);
    let bound = this.binds.get(installRoot);
    if (!bound) {
      bound = this.bind(installRoot, name);
      this.binds.set(installRoot, bound);
    }
    return bound;
  }

  /** Unmounts this process's binds. */
  async dispose(): Promise<void> {
    const binds = [...this.binds.values()];
    this.binds.clear();
    await Promise.all(binds.map((bound) => bound.then((target) => this.retire(target)).catch(() => undefined)));
  }

  private async bind(installRoot: string, name: string): Promise<string> {
    this.reaped ??= this.reapDeadOwners();
    await this.reaped;
    const target = join(this.root, `${ownedName()}-${name}`);
    await mkdir(target, { recursive: true, mode: 0o755 });
    try {
      await bindReadOnly(installRoot, target);
    } catch (error) {
      await rmdir(target).catch(() => undefined);
      throw error;
    }
    return target;
  }

  private async reapDeadOwners(): Promise<void> {
    await unmountOrphans(this.root, isAlive);
    for (const entry of await readdir(this.root).catch(() => [])) {
      const owner = Number(entry.split('-')[0]);
      // rmdir, never a recursive removal: a mount point still mounted is left alone (EBUSY).
      if (Number.isInteger(owner) && owner > 0 && !isAlive(owner)) await rmdir(join(this.root, entry)).catch(() => undefined);
    }
  }

  private async retire(target: string): Promise<void> {
    await unmountLazily(target).catch(() => undefined);
    await rmdir(target).catch(() => undefined);
  }
}
