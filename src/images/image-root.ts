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
    '--upper-bytes',
    String(root.writableBytes),
    '--target',
    root.target,
    ...root.layers.flatMap((layer) => ['--layer', layer]),
    '--',
  ];
}
