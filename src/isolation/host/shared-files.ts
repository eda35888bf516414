import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SANDBOX_GID, SANDBOX_UID } from '../bubblewrap/bwrap-argv.js';

/**
 * Writes a shared file by renaming a new one over it: other agent-runner processes on the host
 * launch sandboxes from the same files, and must never read one half-written. A file that
 * already holds the content is left as it is: replacing it would delete the inode another
 * process's bwrap may be binding at that moment ("Unable to find ... (deleted)").
 */
export function replaceFile(path: string, content: string | Buffer): void {
  if (holds(path, content)) return;
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, content, { mode: 0o644 });
  renameSync(tmp, path);
}

/**
 * The /etc/hosts of a sandbox that has no network beyond its loopback: `localhost` (and its own
 * host name) resolve to it, as every system has them. Without the file nothing resolves them at
 * all (glibc has no built-in localhost), and a server in the sandbox is not reached by that name.
 */
export const LOOPBACK_HOSTS = ['127.0.0.1 localhost sandbox', '::1 localhost ip6-localhost ip6-loopback'];

/** Writes the loopback /etc/hosts (LOOPBACK_HOSTS) into `dir`, for every sandbox without egress to share; its path. */
export function writeLoopbackHosts(dir: string): string {
  const path = join(dir, 'hosts-loopback');
  replaceFile(path, `${LOOPBACK_HOSTS.join('\n')}\n`);
  return path;
}

/** The passwd and group files a sandbox sees, as the host wrote them. */
export interface IdentityFilePair {
  passwd: string;
  group: string;
}

/** Who uid 1000 is, by the name the template gives its user (SandboxTemplate.user). */
const USERS = {
  sandbox: { home: '/tmp', suffix: '', shell: '/bin/sh' },
  // E2B's sandboxes name their user `user`, at home in /home/user, with bash for a shell; tools
  // that ask (whoami, git, a desktop's terminal) say so.
  user: { home: '/home/user', suffix: '-user', shell: '/bin/bash' },
} as const;

export type IdentityFiles = Record<keyof typeof USERS, IdentityFilePair>;

/** passwd/group naming the sandbox user, one pair per name it may have, so tools that look it up do not fail. */
export function writeIdentityFiles(dir: string): IdentityFiles {
  const pairs = Object.entries(USERS).map(([name, { home, suffix, shell }]) => {
    const files = { passwd: join(dir, `passwd${suffix}`), group: join(dir, `group${suffix}`) };
    replaceFile(
      files.passwd,
      `root:x:0:0:root:/root:/usr/sbin/nologin\n${name}:x:${SANDBOX_UID}:${SANDBOX_GID}:${name}:${home}:${shell}\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    );
    replaceFile(files.group, `root:x:0:\n${name}:x:${SANDBOX_GID}:\nnogroup:x:65534:\n`);
    return [name, files] as const;
  });
  return Object.fromEntries(pairs) as IdentityFiles;
}

function holds(path: string, content: string | Buffer): boolean {
  try {
    return readFileSync(path).equals(Buffer.from(content));
  } catch {
    return false;
  }
}
