import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync, readlinkSync, type Stats } from 'node:fs';
import { join, posix } from 'node:path';
import { pack } from 'tar-stream';
import type { ImageStore } from '../images/image-store.js';
import { unpackLayer } from '../images/layer-unpack.js';
import { invalid } from './dockerfile.js';

// An image as its layers make it, read on the host without following any of its links (each
// layer's tree walked a component at a time with lstat), and layers of entries made here.

/**
 * Stores a layer of `entries` under `key` (a build step's, not its tar's digest), their parent
 * directories as the layers below (`lowerTrees`) have them; `replace`: one stored there before.
 */
export async function storeEntriesLayer(store: ImageStore, key: string, lowerTrees: string[], entries: TarEntry[], replace: boolean): Promise<void> {
  const tar = tarOf(withParents(entries, lowerTrees));
  await store.ensureLayer(`sha256:${key}`, store.maxImageBytes, (dir, limits) => unpackLayer(tar, false, dir, limits), { replace, keyed: true });
}

/** A file, directory or link of a layer made here (a COPY's, a WORKDIR's, the sandbox user's), as it goes into its tar. */
export interface TarEntry {
  name: string;
  directory?: boolean;
  content?: Buffer;
  linkname?: string;
  mode?: number;
  uid?: number;
  gid?: number;
}

/** A regular file's bytes, opened without following a link (one swapped in since it was listed is refused). */
export function readRegular(path: string): Buffer {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    if (!fstatSync(fd).isFile()) throw new Error(`${path} is no longer a regular file`);
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A colon-separated table of the image (/etc/passwd, /etc/group), its lines split; none if the image has no such file. */
export function imageTable(trees: readonly string[], path: string): string[][] {
  const file = imageFile(trees, path);
  return file ? tableOf(file.content) : [];
}

/** The lines of a colon-separated table (/etc/passwd's), split; blank lines and comments left out. */
export function tableOf(content: Buffer): string[][] {
  return content
    .toString('utf8')
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => line.split(':'));
}

/** The regular file at `path` of the image (its links resolved as the image reads them): where it is, its bytes and its lstat; none if there is no such file. */
export function imageFile(trees: readonly string[], path: string): { path: string; content: Buffer; stat: Stats } | undefined {
  const resolved = resolveInImage(trees, path, true);
  const found = imageEntry(trees, resolved);
  if (!found?.stat.isFile()) return undefined;
  return { path: resolved, content: readRegular(join(found.tree, resolved)), stat: found.stat };
}

/**
 * The entries with each directory above them too, as the layers below have it (owner, mode):
 * a directory of the new layer hides the lower one's attributes, so an implicit parent made
 * root's 0755 would take /home/user from the user.
 */
function withParents(entries: TarEntry[], lowerTrees: string[]): TarEntry[] {
  const named = new Set(entries.map((entry) => entry.name));
  const parents: TarEntry[] = [];
  for (const entry of entries) {
    for (let dir = posix.dirname(entry.name); dir !== '.' && dir !== '' && !named.has(dir); dir = posix.dirname(dir)) {
      named.add(dir);
      const below = imageLstat(lowerTrees, dir);
      parents.push({ name: dir, directory: true, ...(below?.isDirectory() ? { mode: below.mode & 0o7777, uid: below.uid, gid: below.gid } : { mode: 0o755 }) });
    }
  }
  return [...parents.sort((a, b) => a.name.length - b.name.length), ...entries];
}

/**
 * What `path` (relative) is in the image the layers make: the topmost layer's entry and that
 * layer's tree, found by walking each layer's tree a component at a time with lstat, so that no
 * link of the image is followed on the host (a layer whose path goes through a link of its own is
 * skipped there).
 */
export function imageEntry(trees: readonly string[], path: string): { tree: string; stat: Stats } | undefined {
  const parts = path.split('/').filter((part) => part !== '');
  for (const tree of [...trees].reverse()) {
    let at = tree;
    let stat: Stats | undefined;
    for (const [index, part] of parts.entries()) {
      at = join(at, part);
      stat = lstatSync(at, { throwIfNoEntry: false });
      if (!stat || (index < parts.length - 1 && !stat.isDirectory())) {
        stat = undefined;
        break;
      }
    }
    if (stat) return { tree, stat };
  }
  return undefined;
}

function imageLstat(trees: readonly string[], path: string): Stats | undefined {
  return imageEntry(trees, path)?.stat;
}

/**
 * An absolute path of the image with the links among its directories resolved as the image
 * reads them (an absolute target from the image's root), the last component too when `whole`;
 * at most 40 links, as the kernel allows.
 */
export function resolveInImage(trees: readonly string[], path: string, whole: boolean): string {
  let parts = path.split('/').filter((part) => part !== '');
  let resolved: string[] = [];
  for (let hops = 0, index = 0; index < parts.length; index++) {
    const candidate = [...resolved, parts[index]!];
    const found = index < parts.length - 1 || whole ? imageEntry(trees, candidate.join('/')) : undefined;
    if (!found?.stat.isSymbolicLink()) {
      resolved = candidate;
      continue;
    }
    if (++hops > 40) throw invalid(`${path}: more than 40 links in the image`, 0, 'COPY');
    const target = readlinkSync(join(found.tree, ...candidate));
    const base = target.startsWith('/') ? [] : resolved;
    parts = [
      ...posix
        .normalize(posix.join('/', ...base, target))
        .split('/')
        .filter((part) => part !== ''),
      ...parts.slice(index + 1),
    ];
    resolved = [];
    index = -1;
  }
  return `/${resolved.join('/')}`;
}

function tarOf(entries: TarEntry[]): AsyncIterable<Uint8Array> {
  const tar = pack();
  for (const entry of entries) {
    const header = { name: entry.name, mode: entry.mode ?? (entry.directory ? 0o755 : 0o644), uid: entry.uid ?? 0, gid: entry.gid ?? 0, mtime: new Date(0) };
    if (entry.directory) tar.entry({ ...header, type: 'directory' });
    else if (entry.linkname !== undefined) tar.entry({ ...header, type: 'symlink', linkname: entry.linkname });
    else tar.entry({ ...header, type: 'file' }, entry.content ?? Buffer.alloc(0));
  }
  tar.finalize();
  // A pack yields the tar's bytes as Buffers.
  return tar as AsyncIterable<Buffer>;
}
