import { readFileSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';

/**
 * Programs that turn text into commands. A shell under another name (rbash, a hard link) is
 * still found: files are matched by identity, not by name.
 */
export const SHELL_NAMES: ReadonlySet<string> = new Set([
  'sh',
  'bash',
  'rbash',
  'dash',
  'zsh',
  'ksh',
  'ksh93',
  'mksh',
  'pdksh',
  'ash',
  'yash',
  'posh',
  'fish',
  'csh',
  'tcsh',
  'busybox',
  'sash',
]);

/** Where the minimal profiles' PATH and the usual admin directories keep programs. */
const PROGRAM_DIRS = ['/usr/local/bin', '/usr/local/sbin', '/usr/bin', '/usr/sbin', '/usr/games'];
const SYSTEM_ROOT = '/usr/';

/**
 * The files of the read-only system that are shells: every file in the program directories
 * that is (by device and inode) one of the shells named above or in /etc/shells. Real paths,
 * so hiding each one also disables every link to it (/bin/sh -> dash).
 */
export function findShellFiles(): string[] {
  const named = [...SHELL_NAMES, ...etcShells()];
  const identities = new Set<string>();
  for (const dir of PROGRAM_DIRS) for (const name of named) addIdentity(identities, join(dir, name));
  for (const path of etcShellPaths()) addIdentity(identities, path);

  const found = new Set<string>();
  for (const dir of PROGRAM_DIRS) {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      continue;
    }
    for (const entry of entries) {
      const real = realFile(join(dir, entry));
      if (real && identities.has(real.identity)) found.add(real.path);
    }
  }
  return [...found].sort();
}

function addIdentity(identities: Set<string>, path: string): void {
  const real = realFile(path);
  if (real) identities.add(real.identity);
}

function realFile(path: string): { path: string; identity: string } | null {
  try {
    const real = realpathSync(path);
    const info = statSync(real);
    return real.startsWith(SYSTEM_ROOT) && info.isFile() ? { path: real, identity: `${info.dev}:${info.ino}` } : null;
  } catch {
    return null;
  }
}

function etcShellPaths(): string[] {
  try {
    return readFileSync('/etc/shells', 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('/'));
  } catch {
    return [];
  }
}

function etcShells(): string[] {
  return etcShellPaths().map((path) => basename(path));
}
