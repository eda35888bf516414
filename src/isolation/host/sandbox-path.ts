import { lstat, readlink, realpath } from 'node:fs/promises';
import { posix } from 'node:path';
import { SafeDir } from '../../workspace/safe-fs.js';

/** How many links one resolution may follow, as the kernel's ELOOP limit. */
const MAX_LINKS = 40;

/** The read-only system the minimal profiles see at the host's own paths (the job cannot write it). */
const SYSTEM_ROOT = '/usr/';

export type ResolvedPath =
  /** A file in the work dir: its components below the work dir, every link already resolved. */
  | { where: 'work'; sandboxPath: string; components: string[] }
  /** A file of the read-only system, at the same path on the host. */
  | { where: 'system'; sandboxPath: string };

/**
 * Resolves a sandbox path as the job's own mount namespace would, without ever letting a link
 * the job planted lead the host anywhere: links inside the work dir are read (never followed)
 * and resolved in sandbox terms, so `..` at the work dir's top leaves it for the sandbox's
 * root, not the host's parent directory; outside the work dir only the read-only system
 * (/usr, reached through the /bin-style links) exists. Null when the path leads nowhere the
 * job can see.
 */
export async function resolveSandboxPath(path: string, workDir: { sandbox: string; host: string } | null): Promise<ResolvedPath | null> {
  let pending = posix.resolve('/', path);
  for (let links = 0; links <= MAX_LINKS; links += 1) {
    if (workDir && (pending === workDir.sandbox || pending.startsWith(`${workDir.sandbox}/`))) {
      const step = await followInWorkDir(workDir, pending);
      if (step === null) return null;
      if ('resolved' in step) return step.resolved;
      pending = step.next;
      continue;
    }
    // The system is the host's own, read-only to every job: the host may resolve it directly.
    const real = await realpath(pending).catch(() => null);
    return real !== null && real.startsWith(SYSTEM_ROOT) ? { where: 'system', sandboxPath: real } : null;
  }
  return null;
}

/** Walks the work dir from its fd; at the first link, answers where resolution continues. */
async function followInWorkDir(workDir: { sandbox: string; host: string }, path: string): Promise<{ resolved: ResolvedPath } | { next: string } | null> {
  const components = posix
    .relative(workDir.sandbox, path)
    .split('/')
    .filter((part) => part !== '');
  let dir = await SafeDir.open(workDir.host);
  try {
    for (const [index, name] of components.entries()) {
      const info = await lstat(dir.entryPath(name)).catch(() => null);
      if (!info) return null;
      if (info.isSymbolicLink()) {
        const target = await readlink(dir.entryPath(name));
        const here = posix.join(workDir.sandbox, ...components.slice(0, index));
        return { next: posix.resolve(here, target, ...components.slice(index + 1)) };
      }
      if (index === components.length - 1) return { resolved: { where: 'work', sandboxPath: posix.join(workDir.sandbox, ...components), components } };
      if (!info.isDirectory()) return null;
      const child = await dir.openDir(name);
      await dir.close();
      dir = child;
    }
    return { resolved: { where: 'work', sandboxPath: workDir.sandbox, components } };
  } finally {
    await dir.close().catch(() => undefined);
  }
}
