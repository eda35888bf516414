import { closeSync, constants, openSync } from 'node:fs';
import { basename, dirname } from 'node:path';

/** The room a unix socket's path has (sun_path is 108 bytes, the last one its terminating NUL). */
const SUN_PATH_BYTES = 107;

/**
 * Runs `use` (a connect or a listen) with a path that reaches the unix socket at `path` however long
 * `path` is: itself when it fits, else the socket's name under /proc/self/fd/N, a descriptor of its
 * directory held open until `use` is done. A state dir deep in a file system (a CI workspace, a
 * test's temp dir) otherwise makes every socket under it fail with "path too long".
 */
export async function withinReach<T>(path: string, use: (reachable: string) => Promise<T>): Promise<T> {
  if (Buffer.byteLength(path) <= SUN_PATH_BYTES) return use(path);
  const dir = openSync(dirname(path), constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    return await use(`/proc/self/fd/${dir}/${basename(path)}`);
  } finally {
    closeSync(dir);
  }
}
