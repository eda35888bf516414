import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, resolve } from 'node:path';

/** The glibc default when PATH is unset, as execvp uses it. */
const DEFAULT_PATH = '/bin:/usr/bin';

/**
 * argv[0] as execvp would find it: a name with a slash is a path (relative to `cwd`); a bare
 * name is the first executable file along `searchPath` that `visible` accepts (the sandbox
 * hides some directories, and a lookup must not settle on a file the job cannot see).
 */
export function resolveExecutable(name: string, searchPath: string | undefined, cwd: string, visible: (path: string) => boolean): string | null {
  if (name.includes('/')) {
    const path = resolve(cwd, name);
    return isExecutableFile(path) && visible(path) ? path : null;
  }
  for (const dir of (searchPath ?? DEFAULT_PATH).split(delimiter)) {
    if (dir === '' || !isAbsolute(dir)) continue;
    const path = resolve(dir, name);
    if (isExecutableFile(path) && visible(path)) return path;
  }
  return null;
}

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
