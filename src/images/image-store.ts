import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-write.js';
import { execFileWhenQuiet } from '../util/fork-gate.js';
import { withFileLock } from '../util/file-lock.js';
import { makePrivateDirSync } from '../util/private-dir.js';
import { processIdentity } from '../util/process-identity.js';
import { formatImageReference, type ImageReference } from './image-reference.js';
import { isIndex, MANIFEST_ACCEPT, parseConfig, parseManifest, platformManifest, type ImageRunConfig } from './image-manifest.js';
import { unpackLayer, type UnpackedLayer } from './layer-unpack.js';
import { applyOverlayMarks } from './overlay-marks.js';
import { failure, readAll, RegistryClient, type RegistryOptions } from './registry-client.js';
import { sha256Digest } from './digest.js';

/** An image whose layers are all in the store: what a template of it is made of. */
export interface StoredImage {
  /** The manifest's digest (of the linux/amd64 manifest, when the reference named an index). */
  digest: string;
  /** Where it came from: a reference as pulled, or `archive:` and the file's name. */
  source: string;
  config: ImageRunConfig;
  /** Bottom first: each its diff id, and its bytes and entries unpacked. */
  layers: { diffId: string; bytes: number; entries: number }[];
  bytes: number;
  storedAt: string;
}

/** How ensureLayer stores a layer: `replace` one there; `keyed`: its id is a build step's key, not its tar's digest. */
export interface LayerOptions {
  replace?: boolean;
  keyed?: boolean;
}

export interface ImageLimits {
  /** Bytes an image may take, compressed as pulled and unpacked alike. */
  maxImageBytes: number;
  maxEntries: number;
}

const MANIFEST_BYTES = 4 * 1024 * 1024;
const CONFIG_BYTES = 8 * 1024 * 1024;

/**
 * Images and their layers on the host's disk, content-addressed: a layer is unpacked once, under
 * its diff id, and shared read-only by every image (and every sandbox) that holds it.
 *   layers/<hex>/tree     the layer's files, with its overlay marks (whiteouts, opaque dirs)
 *   layers/<hex>/layer.json
 *   images/<hex>.json     a StoredImage, by manifest digest
 *   staging/              work in progress; what a crash left there is removed when a store opens
 * A layer or an image appears by one rename of a whole directory or file, so a store never holds
 * half of one. The store is root's alone (0700): a layer's setuid files are the image's, for its
 * sandboxes, and no user of the host reaches them.
 */
export class ImageStore {
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(
    readonly root: string,
    private readonly limits: ImageLimits,
  ) {
    makePrivateDirSync(root);
    for (const dir of ['layers', 'images']) mkdirSync(join(root, dir), { recursive: true, mode: 0o700 });
    chmodSync(root, 0o700);
    mkdirSync(join(root, 'staging'), { recursive: true, mode: 0o700 });
    this.removeAbandonedStaging();
  }

  /**
   * What a process that died left in staging (a pull, an upload, a build step cut short): each
   * entry is named by the pid that made it, and one whose process lives is another's work under
   * way (every process of a service, and the CLI, opens the same store). What cannot be removed
   * (a tree deeper than a path can name) is left, never a reason not to open.
   */
  private removeAbandonedStaging(): void {
    for (const entry of readdirSync(join(this.root, 'staging'))) {
      const pid = Number(/^(\d+)-/.exec(entry)?.[1]);
      if (pid > 0 && processIdentity(pid) !== null) continue;
      try {
        rmSync(join(this.root, 'staging', entry), { recursive: true, force: true });
      } catch {
        // Left for a later open.
      }
    }
  }

  get maxImageBytes(): number {
    return this.limits.maxImageBytes;
  }

  /** Pulls an image from its registry; layers already here are not fetched again. */
  /** Pulls `reference` into the store (see pullHeld), its layers held from removal meanwhile. */
  pull(reference: ImageReference, options: RegistryOptions): Promise<StoredImage> {
    return this.holding(() => this.pullHeld(reference, options));
  }

  private async pullHeld(reference: ImageReference, options: RegistryOptions): Promise<StoredImage> {
    const client = new RegistryClient(reference, options);
    const name = formatImageReference(reference);
    let manifest = await client.manifest(reference.digest ?? reference.tag!, MANIFEST_ACCEPT, MANIFEST_BYTES);
    let body = parseJson(manifest.body, `the manifest of ${name}`);
    if (isIndex(body, manifest.mediaType)) {
      manifest = await client.manifest(platformManifest(body, name), MANIFEST_ACCEPT, MANIFEST_BYTES);
      body = parseJson(manifest.body, `the manifest of ${name}`);
    }
    const parsed = parseManifest(body, name);
    const compressedBytes = parsed.layers.reduce((sum, layer) => sum + layer.size, 0);
    if (compressedBytes > this.limits.maxImageBytes)
      throw failure('image.too_large', `${name} is ${compressedBytes} bytes compressed, over templates.maxImageBytes (${this.limits.maxImageBytes})`);
    const configBody = await collect((await client.blob(parsed.config.digest)).chunks, CONFIG_BYTES, parsed.config.digest, `the config of ${name}`);
    const config = parseConfig(parseJson(configBody, `the config of ${name}`), parsed.layers.length, name);
    let budget = this.limits.maxImageBytes;
    const layers: StoredImage['layers'] = [];
    for (const [index, layer] of parsed.layers.entries()) {
      const diffId = config.diffIds[index]!;
      const stored = await this.ensureLayer(diffId, budget, async (dir, limits) => {
        const blob = await client.blob(layer.digest);
        if (blob.declaredBytes !== null && blob.declaredBytes !== layer.size)
          throw failure('image.digest_mismatch', `layer ${layer.digest} of ${name} is ${blob.declaredBytes} bytes, not ${layer.size}`);
        const unpacked = await unpackLayer(blob.chunks, layer.compressed, dir, limits);
        if (unpacked.blobDigest !== layer.digest) throw failure('image.digest_mismatch', `layer ${index} of ${name} came as ${unpacked.blobDigest}, not ${layer.digest}`);
        return unpacked;
      });
      budget -= stored.bytes;
      layers.push(stored);
    }
    return this.record({ digest: manifest.digest, source: name, config: config.run, layers });
  }

  /** The image stored under a manifest digest, or null. */
  image(digest: string): StoredImage | null {
    const file = join(this.root, 'images', `${hex(digest)}.json`);
    return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as StoredImage) : null;
  }

  /** The host directories of an image's layers, bottom first. */
  layerTrees(image: StoredImage): string[] {
    return image.layers.map((layer) => join(this.root, 'layers', hex(layer.diffId), 'tree'));
  }

  /** Every stored image. */
  images(): StoredImage[] {
    return readdirSync(join(this.root, 'images'))
      .filter((file) => file.endsWith('.json'))
      .map((file) => JSON.parse(readFileSync(join(this.root, 'images', file), 'utf8')) as StoredImage);
  }

  /** Forgets an image, and removes the layers no other stored image holds. */
  async remove(digest: string): Promise<void> {
    rmSync(join(this.root, 'images', `${hex(digest)}.json`), { force: true });
    // Once no pull, import or build of any process is under way: theirs may use a layer that
    // no image records yet (one found here and taken as it is, or a build's step's).
    await withFileLock(this.lockPath, 'exclusive', async () => {
      const held = new Set(this.images().flatMap((image) => image.layers.map((layer) => hex(layer.diffId))));
      for (const layer of readdirSync(join(this.root, 'layers'))) {
        if (!held.has(layer) && !this.inFlight.has(`sha256:${layer}`)) this.discard(join(this.root, 'layers', layer));
      }
    });
  }

  /**
   * `work` (a pull, an archive's import, a build: whatever stores layers and then records the
   * image that holds them) with the store's lock shared: no removal of layers runs meanwhile, in
   * this process or another on the same store.
   */
  holding<T>(work: () => Promise<T>): Promise<T> {
    return withFileLock(this.lockPath, 'shared', work);
  }

  private get lockPath(): string {
    return join(this.root, 'lock');
  }

  /**
   * The layer of `diffId`, unpacked by `fill` into a staging dir unless it is here already (or
   * under way for another pull): the tar's diff id must be the config's, its bytes within `budget`.
   */
  async ensureLayer(
    diffId: string,
    budget: number,
    fill: (dir: string, limits: { maxBytes: number; maxEntries: number }) => Promise<UnpackedLayer>,
    options: LayerOptions = {},
  ): Promise<StoredImage['layers'][number]> {
    const final = join(this.root, 'layers', hex(diffId));
    const pending = this.inFlight.get(diffId);
    if (pending) await pending.catch(() => undefined);
    if (options.replace) this.discard(final);
    if (!existsSync(final)) {
      const filling = this.fillLayer(diffId, final, budget, fill, options.keyed === true);
      this.inFlight.set(diffId, filling);
      try {
        await filling;
      } finally {
        this.inFlight.delete(diffId);
      }
    }
    const layer = this.storedLayer(diffId);
    if (layer.bytes > budget) throw failure('image.too_large', `the image is over templates.maxImageBytes (${this.limits.maxImageBytes}) unpacked`);
    return layer;
  }

  /** Whether the layer of a build's key (hex) is stored. */
  hasLayer(key: string): boolean {
    return existsSync(join(this.root, 'layers', key, 'layer.json'));
  }

  /** A stored layer's id, bytes and entries. */
  storedLayer(diffId: string): StoredImage['layers'][number] {
    const layer = JSON.parse(readFileSync(join(this.root, 'layers', hex(diffId), 'layer.json'), 'utf8')) as Pick<UnpackedLayer, 'bytes' | 'entries'>;
    return { diffId, bytes: layer.bytes, entries: layer.entries };
  }

  /**
   * Stores a build step's kept writable layer (its files already the image's owners, its
   * whiteouts and opaque marks overlayfs's own) under the step's key, replacing one there.
   */
  async adoptLayer(key: string, upper: string, budget: number): Promise<void> {
    const { bytes, entries } = treeSize(upper);
    if (bytes > budget || entries > this.limits.maxEntries)
      throw failure('image.too_large', `a build step wrote ${bytes} bytes in ${entries} entries: over templates.maxImageBytes (${this.limits.maxImageBytes}) or maxImageEntries`);
    const staging = this.stagingDir();
    mkdirSync(staging, { mode: 0o700 });
    try {
      // Written on a disk of its own (a build step's scratch disk): copied, owners, modes, links,
      // whiteouts and overlayfs's xattrs with it.
      await moveTree(upper, join(staging, 'tree'));
      await writeFileAtomic(join(staging, 'layer.json'), `${JSON.stringify({ bytes, entries })}\n`);
      const final = join(this.root, 'layers', key);
      this.discard(final);
      renameSync(staging, final);
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
  }

  /** A stored layer out of the way in one rename, then removed: no reader meets half of it. */
  private discard(layerDir: string): void {
    if (!existsSync(layerDir)) return;
    const doomed = this.stagingDir();
    renameSync(layerDir, doomed);
    rmSync(doomed, { recursive: true, force: true });
  }

  /** Stores an image's record once all its layers are in: the image exists from this rename on. */
  async record(image: Omit<StoredImage, 'bytes' | 'storedAt'>): Promise<StoredImage> {
    const stored: StoredImage = { ...image, bytes: image.layers.reduce((sum, layer) => sum + layer.bytes, 0), storedAt: new Date().toISOString() };
    await writeFileAtomic(join(this.root, 'images', `${hex(image.digest)}.json`), `${JSON.stringify(stored, null, 2)}\n`);
    return stored;
  }

  stagingDir(): string {
    return join(this.root, 'staging', `${process.pid}-${randomBytes(8).toString('hex')}`);
  }

  private async fillLayer(
    diffId: string,
    final: string,
    budget: number,
    fill: (dir: string, limits: { maxBytes: number; maxEntries: number }) => Promise<UnpackedLayer>,
    keyed: boolean,
  ): Promise<void> {
    const staging = this.stagingDir();
    mkdirSync(join(staging, 'tree'), { recursive: true, mode: 0o700 });
    try {
      const unpacked = await fill(join(staging, 'tree'), { maxBytes: budget, maxEntries: this.limits.maxEntries });
      if (!keyed && unpacked.diffId !== diffId) throw failure('image.digest_mismatch', `a layer's tar is ${unpacked.diffId}, not ${diffId} as the image's config says`);
      await applyOverlayMarks(join(staging, 'tree'), unpacked);
      await writeFileAtomic(join(staging, 'layer.json'), `${JSON.stringify(unpacked)}\n`);
      try {
        renameSync(staging, final);
      } catch (error) {
        // Another process of this store put the same layer in first: the same bytes, so theirs stands.
        if (!existsSync(final)) throw error;
      }
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
  }
}

export function hex(digest: string): string {
  return digest.slice('sha256:'.length);
}

export function parseJson(body: Buffer, what: string): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw failure('image.invalid', `${what} is not JSON: ${(error as Error).message}`);
  }
}

/** A small blob (a config) read whole, and checked against its digest. */
async function collect(chunks: AsyncIterable<Uint8Array>, maxBytes: number, digest: string, what: string): Promise<Buffer> {
  const body = await readAll(chunks, maxBytes, what);
  if (sha256Digest(body) !== digest) throw failure('image.digest_mismatch', `${what} does not match its digest ${digest}`);
  return body;
}

/** Bytes of files and entries of a tree, walked without following a link. */
function treeSize(root: string): { bytes: number; entries: number } {
  let bytes = 0;
  let entries = 0;
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      entries++;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) bytes += lstatSync(path).size;
    }
  };
  walk(root);
  return { bytes, entries };
}

/** Renames a tree, or where it is on another file system, copies it whole (cp -a: as root, every owner, mode, device node and xattr) and removes it. */
async function moveTree(from: string, to: string): Promise<void> {
  try {
    renameSync(from, to);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
    await execFileWhenQuiet('/usr/bin/cp', ['-a', '--no-target-directory', '--', from, to]);
    rmSync(from, { recursive: true, force: true });
  }
}
