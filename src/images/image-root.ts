import { lstatSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileWhenQuiet } from '../util/fork-gate.js';
import { hostId, type IdRange } from '../util/id-ranges.js';

/** The native helper that writes overlay marks and mounts image roots (native/image-root.c). */
export const IMAGE_ROOT_HELPER = fileURLToPath(new URL('../../dist/native/image-root', import.meta.url));

/** The ids of an image its sandboxes map, from 0: Linux's 16-bit range, every owner an image names. */
export const IMAGE_IDS = 65_536;

/** Where and of what a sandbox's image root is mounted (template.image), and the host ids the image's are mapped to. */
export interface ImageRootMount {
  target: string;
  layers: readonly string[];
  writableBytes: number;
  /** A host directory for the writable layer (SandboxTemplate.image.keepWritableIn), not a tmpfs. */
  keepWritableIn?: string;
  ids: readonly IdRange[];
  /**
   * Host directories (the host's /usr) overlaid at their own paths with writable layers beside the
   * root's: a root of the host's system the sandbox may change (the layers hold them, empty).
   */
  systemDirs?: readonly string[];
  /** What it execs stays the host's root (a restore by CRIU, which makes the sandbox's namespaces itself), not the sandbox's root uid. */
  execAsHostRoot?: boolean;
}

/**
 * The image-root helper's part of the launcher chain: it mounts the root in a mount namespace of
 * its own, as root, then becomes the sandbox's root uid and execs the rest (prlimit, bwrap).
 */
export function imageRootArgv(root: ImageRootMount): string[] {
  const mappedRoot = hostId(root.ids, 0);
  if (mappedRoot === undefined) throw new Error("an image root's ids must map root");
  const rootId = root.execAsHostRoot ? 0 : mappedRoot;
  return [
    IMAGE_ROOT_HELPER,
    'mount',
    '--uid',
    String(rootId),
    '--gid',
    String(rootId),
    '--map',
    root.ids.map(({ inside, host, count }) => `${inside}:${host}:${count}`).join(','),
    ...(root.keepWritableIn ? ['--upper-dir', root.keepWritableIn] : ['--upper-bytes', String(root.writableBytes)]),
    '--target',
    root.target,
    ...root.layers.flatMap((layer) => ['--layer', layer]),
    ...(root.systemDirs ?? []).flatMap((dir) => ['--system', dir]),
    '--',
  ];
}

/** Whether an image's layers hold an /etc/passwd of their own (then the sandbox gets none of the host's making); looked at without following the image's links on the host. */
export function layersHoldPasswd(layers: readonly string[]): boolean {
  return layers.some(
    (layer) =>
      lstatSync(join(layer, 'etc'), { throwIfNoEntry: false })?.isDirectory() === true && lstatSync(join(layer, 'etc', 'passwd'), { throwIfNoEntry: false })?.isFile() === true,
  );
}

/**
 * After a build step's sandbox ended: the owners of its kept writable layer's files made the
 * image's (the sandbox's host ids back to the image's, as the launcher wrote them in `ids`
 * beside the layer, where the sandbox never reached), so the layer is one of the image's.
 */
export async function shiftKeptLayer(keptIn: string): Promise<void> {
  const ids = readFileSync(join(keptIn, 'ids'), 'utf8');
  await execFileWhenQuiet(IMAGE_ROOT_HELPER, ['shift', join(keptIn, 'upper'), '--map', ids]);
}
