import { spawn } from 'node:child_process';
import { createHash, type Hash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { posix } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { extract as tarExtract, pack as tarPack, type Header } from 'tar-stream';
import { forkWhenQuiet } from '../util/fork-gate.js';

/** A layer packed as a registry takes it: gzip of a tar, with both digests. */
export interface PackedLayer {
  /** sha256 of the gzip (the blob's digest). */
  digest: string;
  /** sha256 of the tar (the image config's diff id). */
  diffId: string;
  /** Bytes of the gzip. */
  size: number;
}

const OPAQUE_XATTR = 'SCHILY.xattr.trusted.overlay.opaque';
const WHITEOUT_PREFIX = '.wh.';
const OPAQUE_MARK = '.wh..wh..opq';

/**
 * Packs a stored layer's tree (the store's or a build's: overlayfs's marks in it) into `file` as
 * an OCI layer, the inverse of layer-unpack.ts: GNU tar reads the tree (owners by number, modes,
 * hard and symbolic links, and the one xattr that matters), and each of overlayfs's marks
 * becomes the OCI one: a 0/0 character device a `.wh.NAME` whiteout, a directory with
 * trusted.overlay.opaque=y the directory and its `.wh..wh..opq`.
 */
export async function packLayer(tree: string, file: string): Promise<PackedLayer> {
  const tar = await forkWhenQuiet(() =>
    spawn('/usr/bin/tar', ['--xattrs', '--xattrs-include=trusted.overlay.opaque', '--numeric-owner', '--sort=name', '-C', tree, '-cf', '-', '.'], {
      env: {},
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let said = '';
  tar.stderr!.on('data', (chunk: Buffer) => (said += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => tar.on('close', resolve));
  const extract = tarExtract();
  const packed = tarPack();
  extract.on('entry', (header, stream, next) => {
    const name = posix
      .normalize(header.name)
      .replace(/^\.\/?/, '')
      .replace(/\/$/, '');
    if (name === '' || name === '.') {
      stream.resume();
      stream.on('end', next);
      return;
    }
    // A hard link names its target as tar named it; a symbolic link's target is its content.
    const linkname = header.type === 'link' && header.linkname ? posix.normalize(header.linkname).replace(/^\.\//, '') : header.linkname;
    const [entry, ...after] = ociEntries({ ...header, name, linkname });
    const sink = packed.entry(entry!, (error) => {
      if (error) return extract.destroy(error);
      for (const mark of after) packed.entry(mark, Buffer.alloc(0));
      next();
    });
    stream.pipe(sink as NodeJS.WritableStream);
  });
  extract.on('finish', () => packed.finalize());
  const tarHash = createHash('sha256');
  const gzipHash = createHash('sha256');
  let size = 0;
  await Promise.all([
    pipeline(tar.stdout!, extract),
    pipeline(
      packed,
      hashing(tarHash),
      createGzip(),
      hashing(gzipHash, (bytes) => (size += bytes)),
      createWriteStream(file, { mode: 0o600 }),
    ),
  ]);
  const code = await exited;
  if (code !== 0) throw new Error(`tar could not read the layer ${tree} (exit ${code}): ${said.trim()}`);
  return { digest: `sha256:${gzipHash.digest('hex')}`, diffId: `sha256:${tarHash.digest('hex')}`, size };
}

/**
 * The OCI entries for one of GNU tar's: the entry itself (a whiteout made OCI's), then the opaque
 * mark of a directory. Its pax records (the xattr read, long names, which the packer writes
 * again as it needs) are not carried over.
 */
function ociEntries(header: Header): Header[] {
  const { pax, ...plain } = header;
  if (header.type === 'character-device' && header.devmajor === 0 && header.devminor === 0) {
    const whiteout = posix.join(posix.dirname(header.name), `${WHITEOUT_PREFIX}${posix.basename(header.name)}`);
    return [{ ...plain, name: whiteout, type: 'file', size: 0, mode: 0o600, devmajor: 0, devminor: 0 }];
  }
  if (header.type === 'directory' && (pax as Record<string, string> | undefined)?.[OPAQUE_XATTR] === 'y') {
    return [plain, { ...plain, name: posix.join(header.name, OPAQUE_MARK), type: 'file', size: 0, mode: 0o600 }];
  }
  return [plain];
}

/** A pass-through that hashes what goes by (and counts it). */
function hashing(hash: Hash, count?: (bytes: number) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      count?.(chunk.length);
      done(null, chunk);
    },
  });
}
