import { mkdirSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * Makes `dir` 0700 with its missing parents as any directory is made (0755 under the usual umask):
 * `mkdir -p` with mode 0700 would make a missing state dir 0700 too, which the unprivileged uids
 * of sandboxes must be able to cross.
 */
export function makePrivateDirSync(dir: string): void {
  mkdirSync(dirname(dir), { recursive: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}

export async function makePrivateDir(dir: string): Promise<void> {
  await mkdir(dirname(dir), { recursive: true });
  await mkdir(dir, { recursive: true, mode: 0o700 });
}
