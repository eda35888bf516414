import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The native helper that writes overlay marks and mounts image roots (native/image-root.c). */
export const IMAGE_ROOT_HELPER = fileURLToPath(new URL('../../dist/native/image-root', import.meta.url));

/** The uid of a sandbox's user, as images name theirs (E2B's `user`) and sandboxes run it. */
const USER_UID = 1000;

/** Where and of what a sandbox's image root is mounted (template.image), and the host uids it is mapped to. */
export interface ImageRootMount {
  target: string;
  layers: readonly string[];
  writableBytes: number;
  /** A host directory for the writable layer (SandboxTemplate.image.keepWritableIn), not a tmpfs. */
  keepWritableIn?: string;
  uids: { root: number; user: number };
}

/**
 * The image-root helper's part of the launcher chain: it mounts the root in a mount namespace of
 * its own, as root, then becomes the sandbox's root uid and execs the rest (prlimit, bwrap).
 */
export function imageRootArgv(root: ImageRootMount): string[] {
  const { uids } = root;
  return [
    IMAGE_ROOT_HELPER,
    'mount',
    '--uid',
    String(uids.root),
    '--gid',
    String(uids.root),
    '--map',
    `0:${uids.root},${USER_UID}:${uids.user}`,
    ...(root.keepWritableIn ? ['--upper-dir', root.keepWritableIn] : ['--upper-bytes', String(root.writableBytes)]),
    '--target',
    root.target,
    ...root.layers.flatMap((layer) => ['--layer', layer]),
    '--',
  ];
}

/**
 * After the sandbox ended: the owners of its kept writable layer's files made the image's (the
 * sandbox's host uids back to root and the user), so the layer is one of the image's like any.
 */
export function shiftKeptLayer(root: ImageRootMount): void {
  const { uids } = root;
  const upper = join(root.keepWritableIn!, 'upper');
  try {
    execFileSync(IMAGE_ROOT_HELPER, ['shift', upper, '--map', `${uids.root}:0,${uids.user}:${USER_UID}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch {
    // A layer whose owners could not all be given back is no layer: gone, its build step fails.
    rmSync(upper, { recursive: true, force: true });
  }
}
