import { createHash, type Hash } from 'node:crypto';
import {
  closeSync,
  fchmodSync,
  fchownSync,
  futimesSync,
  lchownSync,
  linkSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  openSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeSync,
  constants,
} from 'node:fs';
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract as tarExtract, type Extract } from 'tar-stream';
import { CodedError } from '../contract/errors.js';
import { failure } from './registry-client.js';

/** A layer as unpacked: its diff id (the sha256 of its tar), what it holds, and its overlay marks. */
export interface UnpackedLayer {
  /** sha256 of the compressed blob as it came (the manifest's digest of it). */
  blobDigest: string;
  /** sha256 of the uncompressed tar (the config's rootfs.diff_ids entry). */
  diffId: string;
  /** Bytes of its files' contents, and its entries. */
  bytes: number;
  entries: number;
  /**
   * Paths (relative, no leading slash) this layer deletes from the layers under it (`.wh.NAME`),
   * and its directories that hide everything under them there (`.wh..wh..opq`): made into
   * overlayfs's own marks (a 0/0 device, an opaque xattr) by the native helper, as root.
   */
  whiteouts: string[];
  opaque: string[];
}

export interface UnpackLimits {
  /** Bytes of file contents the layer may unpack to. */
  maxBytes: number;
  maxEntries: number;
}

/** What a tar stream may hold beyond its entries' contents (see workspace/sent-archive.ts): a header and padding, a pax pair. */
const FRAMING_BYTES_PER_ENTRY = 4096;
const FRAMING_SLACK_BYTES = 1024 * 1024;
const WHITEOUT_PREFIX = '.wh.';
const OPAQUE_MARK = '.wh..wh..opq';

/**
 * Unpacks one layer blob (gzip or plain tar) into `dir`, an empty directory of the service's own
 * that nothing else writes: each entry is checked before it touches the disk. A name with `..`,
 * an absolute name, an entry under a symlink or a file (written through a link), a hard link to a
 * name this layer does not hold, a device node or FIFO: refused (image.invalid, naming the entry).
 * Files keep the image's owners and modes, setuid bits included: they are the image's own, seen
 * only inside sandboxes (the store is root's alone, 0700). The blob's digest and the tar's diff id
 * are computed on the way; the caller compares them with the manifest's and the config's.
 */
export async function unpackLayer(blob: AsyncIterable<Uint8Array>, compressed: boolean, dir: string, limits: UnpackLimits): Promise<UnpackedLayer> {
  const blobHash = createHash('sha256');
  const diffHash = createHash('sha256');
  const writer = new LayerWriter(dir, limits);
  let expanded = 0;
  const hashed = (hash: Hash) =>
    async function* (chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Buffer> {
      for await (const chunk of chunks) {
        hash.update(chunk);
        yield Buffer.from(chunk);
      }
    };
  // The expansion may not run ahead of what the entries announced (a bomb of zero blocks).
  const counted = async function* (chunks: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    for await (const chunk of chunks) {
      expanded += chunk.length;
      if (expanded > writer.bytes + writer.entries * FRAMING_BYTES_PER_ENTRY + FRAMING_SLACK_BYTES)
        throw failure('image.too_large', `a layer expands to more than its entries and their framing (${expanded} bytes of tar for ${writer.bytes} of files)`);
      yield chunk;
    }
  };
  const extract = tarExtract();
  const source = Readable.from(blob);
  const feeding = (
    compressed ? pipeline(source, hashed(blobHash), createGunzip(), hashed(diffHash), counted, extract) : pipeline(source, hashed(blobHash), hashed(diffHash), counted, extract)
  ).then(
    () => null,
    (error: Error) => error,
  );
  let refused: unknown = null;
  try {
    for await (const entry of extract) await writer.add(entry);
    writer.finish();
  } catch (error) {
    refused = error;
    extract.destroy();
    source.destroy();
  }
  const fed = await feeding;
  const cause = refused instanceof CodedError ? refused : fed instanceof CodedError ? fed : (refused ?? fed);
  if (cause instanceof CodedError) throw cause;
  if (cause !== null) throw failure('image.invalid', `a layer is not a readable ${compressed ? 'tar.gz' : 'tar'}: ${(cause as Error).message}`);
  const blobDigest = `sha256:${blobHash.digest('hex')}`;
  return {
    blobDigest,
    diffId: compressed ? `sha256:${diffHash.digest('hex')}` : blobDigest,
    bytes: writer.bytes,
    entries: writer.entries,
    whiteouts: writer.whiteouts,
    opaque: writer.opaque,
  };
}

type Entry = Extract extends AsyncIterable<infer T> ? T : never;
type Headers = Entry['header'];

/** Writes a layer's entries under its root, tracking what it made so each name is checked once. */
class LayerWriter {
  bytes = 0;
  entries = 0;
  readonly whiteouts: string[] = [];
  readonly opaque: string[] = [];
  /** Directories of this layer, made or met, with their times to set once their children are in. */
  private readonly directories = new Map<string, Headers | null>([['', null]]);

  constructor(
    private readonly root: string,
    private readonly limits: UnpackLimits,
  ) {}

  async add(entry: Entry): Promise<void> {
    const { header } = entry;
    const name = this.checkedName(header.name);
    if (++this.entries > this.limits.maxEntries) throw failure('image.too_large', `a layer has more than ${this.limits.maxEntries} entries`);
    if (name === '') {
      if (header.type === 'directory') this.directories.set('', header);
      return drain(entry);
    }
    const base = posix.basename(name);
    const parent = posix.dirname(name) === '.' ? '' : posix.dirname(name);
    if (base.startsWith(WHITEOUT_PREFIX)) {
      this.parentDirectory(parent, name);
      if (base === OPAQUE_MARK) this.opaque.push(parent);
      else this.whiteouts.push(posix.join(parent, base.slice(WHITEOUT_PREFIX.length)));
      return drain(entry);
    }
    this.parentDirectory(parent, name);
    const path = this.hostPath(name);
    switch (header.type) {
      case 'directory':
        if (!this.directories.has(name)) {
          this.replace(name, path, true);
          mkdirSync(path, { mode: 0o700 });
        }
        lchownSync(path, header.uid ?? 0, header.gid ?? 0);
        this.directories.set(name, header);
        return drain(entry);
      case 'file':
      case 'contiguous-file':
        this.replace(name, path, false);
        return this.writeFile(path, header, entry);
      case 'symlink':
        this.replace(name, path, false);
        symlinkSync(header.linkname ?? '', path);
        lchownSync(path, header.uid ?? 0, header.gid ?? 0);
        if (header.mtime) lutimesSync(path, header.mtime, header.mtime);
        return drain(entry);
      case 'link': {
        const target = this.checkedName(header.linkname ?? '');
        // The target's directory must be one this layer made or met as a real directory: a path
        // through one of its symlinks would link whatever the symlink leads to, on the host.
        const targetParent = posix.dirname(target) === '.' ? '' : posix.dirname(target);
        const stat = target === '' || !this.directories.has(targetParent) ? null : lstatSync(this.hostPath(target), { throwIfNoEntry: false });
        if (!stat || !(stat.isFile() || stat.isSymbolicLink()))
          throw this.refuse(name, `a hard link to ${JSON.stringify(header.linkname)}, which this layer does not hold as a file`);
        this.replace(name, path, false);
        linkSync(this.hostPath(target), path);
        return drain(entry);
      }
      case 'character-device':
        // A 0/0 character device is overlayfs's own whiteout, as some image tools write it.
        if (header.devmajor === 0 && header.devminor === 0) {
          this.whiteouts.push(name);
          return drain(entry);
        }
        throw this.refuse(name, 'a device node');
      case 'block-device':
        throw this.refuse(name, 'a device node');
      default:
        throw this.refuse(name, `a ${header.type ?? 'unknown'} entry`);
    }
  }

  /** Sets the directories' owners' modes and times last: their children changed them meanwhile. */
  finish(): void {
    for (const [name, header] of this.directories) {
      const path = this.hostPath(name);
      if (!header) {
        // Made only as a parent of an entry: as every image tool makes one.
        if (name !== '') chmodDirectory(path, 0o755);
        continue;
      }
      chmodDirectory(path, header.mode ?? 0o755);
      if (header.mtime) utimesSync(path, header.mtime, header.mtime);
    }
  }

  private async writeFile(path: string, header: Headers, entry: Entry): Promise<void> {
    this.bytes += header.size ?? 0;
    if (this.bytes > this.limits.maxBytes) throw failure('image.too_large', `a layer holds more than ${this.limits.maxBytes} bytes of files`);
    const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      for await (const chunk of entry as AsyncIterable<Buffer>) writeSync(fd, chunk);
      // The owner first: a chown clears setuid and setgid bits, which the mode then puts back.
      fchownSync(fd, header.uid ?? 0, header.gid ?? 0);
      fchmodSync(fd, (header.mode ?? 0o644) & 0o7777);
      if (header.mtime) futimesSync(fd, header.mtime, header.mtime);
    } finally {
      closeSync(fd);
    }
  }

  /** `name` without a leading `./` or a trailing slash; refused when it is absolute or has `..`. */
  private checkedName(raw: string): string {
    if (raw.startsWith('/')) throw this.refuse(raw, 'an absolute name');
    const parts = raw.split('/').filter((part) => part !== '' && part !== '.');
    if (parts.includes('..')) throw this.refuse(raw, 'a name with ".."');
    if (parts.some((part) => part.includes('\0'))) throw this.refuse(raw, 'a name with a NUL');
    return parts.join('/');
  }

  /**
   * Makes sure each directory above an entry is a directory of this layer (made if missing, as
   * tar writers may leave it out): never a symlink, which could lead the write out of the layer.
   */
  private parentDirectory(parent: string, entryName: string): void {
    if (this.directories.has(parent)) return;
    const above = posix.dirname(parent) === '.' ? '' : posix.dirname(parent);
    this.parentDirectory(above, entryName);
    const path = this.hostPath(parent);
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (!stat) mkdirSync(path, { mode: 0o700 });
    else if (!stat.isDirectory())
      throw this.refuse(entryName, `an entry under ${JSON.stringify(parent)}, which is ${stat.isSymbolicLink() ? 'a symlink' : 'not a directory'} in this layer`);
    this.directories.set(parent, null);
  }

  /** A later entry of the same name wins (tar's rule): what is there goes, a directory only for a non-directory. */
  private replace(name: string, path: string, directory: boolean): void {
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (!stat || (directory && stat.isDirectory())) return;
    rmSync(path, { recursive: stat.isDirectory(), force: true });
    if (stat.isDirectory()) for (const known of [...this.directories.keys()]) if (known === name || known.startsWith(`${name}/`)) this.directories.delete(known);
  }

  private hostPath(name: string): string {
    return name === '' ? this.root : `${this.root}/${name}`;
  }

  private refuse(name: string, what: string): CodedError {
    return failure('image.invalid', `layer entry ${JSON.stringify(name.slice(0, 256))} is ${what}: refused`, { entry: name.slice(0, 256) });
  }
}

function chmodDirectory(path: string, mode: number): void {
  const fd = openSync(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    fchmodSync(fd, mode & 0o7777);
  } finally {
    closeSync(fd);
  }
}

/** The extractor moves on only once an entry's content is read. */
async function drain(entry: Entry): Promise<void> {
  for await (const _chunk of entry);
}
