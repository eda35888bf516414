import { accessSync, constants, statSync } from 'node:fs';
import { posix } from 'node:path';

/** The glibc default when PATH is unset, as execvp uses it. */
const DEFAULT_PATH = ['/bin', '/usr/bin'];

/**
 * Where execvp would look for argv[0], in order: a name with a slash is one path (relative to
 * `cwd`); a bare name is tried in each absolute directory of the search path. Every face
 * resolves commands through this, so a policy check and the exec agree on the file.
 */
export function commandCandidates(name: string, searchPath: readonly string[] | undefined, cwd: string): string[] {
  if (name.includes('/')) return [posix.resolve(cwd, name)];
  return (searchPath ?? DEFAULT_PATH).filter((dir) => dir !== '' && posix.isAbsolute(dir)).map((dir) => posix.join(dir, name));
}

/**
 * The first candidate that is an executable file the job can see (`visible`: the sandbox
 * hides some directories, and a lookup must not settle on a file the job cannot reach).
 */
export function resolveExecutable(name: string, searchPath: readonly string[] | undefined, cwd: string, visible: (path: string) => boolean): string | null {
  return commandCandidates(name, searchPath, cwd).find((path) => isExecutableFile(path) && visible(path)) ?? null;
}

export function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** PATH text as a list (`a:b:c`). */
export function searchPathOf(path: string | undefined): string[] | undefined {
  return path === undefined ? undefined : path.split(':');
}
