import { openSync, readSync, closeSync, realpathSync, statSync } from 'node:fs';
import { delimiter, dirname, join, sep } from 'node:path';
import { execFileWhenQuiet } from '../util/fork-gate.js';
import { isExecutableFile } from '../isolation/command-path.js';
import type { Mount } from '../isolation/types.js';

/** Where to look for toolchains: the well-known install paths, then a PATH-style list. */
export interface SearchContext {
  searchPath: string;
  useWellKnownPaths: boolean;
}

/** Well-known paths first (so /usr/bin/python3 beats a pyenv shim earlier on PATH), then PATH. */
export function candidatePaths(context: SearchContext, wellKnown: readonly string[], names: readonly string[]): string[] {
  const fromPath = context.searchPath
    .split(delimiter)
    .filter(Boolean)
    .flatMap((dir) => names.map((name) => join(dir, name)));
  return [...(context.useWellKnownPaths ? wellKnown : []), ...fromPath];
}

/** The first real executable among the candidates, skipping scripts (pyenv and asdf shims are bash scripts). */
export function findNativeExecutable(context: SearchContext, wellKnown: readonly string[], names: readonly string[]): string | null {
  for (const candidate of candidatePaths(context, wellKnown, names)) {
    let real: string;
    try {
      real = realpathSync(candidate);
    } catch {
      continue;
    }
    if (isExecutableFile(real) && !isScript(real)) return real;
  }
  return null;
}

function isScript(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(2);
    readSync(fd, head, 0, 2, 0);
    return head.toString('latin1') === '#!';
  } finally {
    closeSync(fd);
  }
}

export async function versionOf(executable: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  // Through the fork gate: a toolchain is first resolved while other jobs' programs may be staged.
  const { stdout, stderr } = await execFileWhenQuiet(executable, args, { env: { PATH: '/usr/bin:/bin', ...env }, timeout: 15_000 });
  return (stdout.trim() || stderr.trim()).split('\n')[0]!.trim();
}

/** True when an unprivileged uid can reach the path (every ancestor searchable by others). */
export function isWorldReachable(path: string): boolean {
  const parts = path.split(sep).filter(Boolean);
  let current = '';
  for (const part of parts) {
    current += sep + part;
    try {
      const mode = statSync(current).mode;
      if (current !== path && (mode & 0o001) === 0) return false;
    } catch {
      return false;
    }
  }
  return true;
}

/** Mount for a toolchain root that lives outside /usr, relocated under /opt/toolchains. */
export function relocatedMount(hostRoot: string, name: string): Mount {
  return { host: hostRoot, sandbox: `/opt/toolchains/${name}`, writable: false };
}

/** Mount for configuration an install reads from outside /usr (under /etc), at its own path. */
export function configMount(dir: string): Mount {
  return { host: dir, sandbox: dir, writable: false };
}

export function installRoot(executable: string): string {
  return dirname(dirname(executable));
}
