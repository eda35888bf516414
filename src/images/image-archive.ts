import { closeSync, createReadStream, existsSync, lstatSync, mkdirSync, openSync, readFileSync, readSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { extract as tarExtract } from 'tar-stream';
import { CodedError } from '../contract/errors.js';
import { hex, parseJson, type ImageStore, type StoredImage } from './image-store.js';
import { checkedDigest, isIndex, parseConfig, parseManifest, platformManifest, type ImageManifest } from './image-manifest.js';
import { unpackLayer } from './layer-unpack.js';
import { failure } from './registry-client.js';
import { sha256Digest } from './digest.js';

/**
 * Stores an image sent as an archive: `docker save` output (manifest.json, a config and a tar per
 * layer) or an OCI image layout (oci-layout, index.json, blobs/sha256/...), as a tar. Its files are
 * first written under a staging dir (regular files and directories only, names checked, bytes
 * capped), then read as the registry's manifests and blobs would be, every blob against its digest.
 */
export function storeImageArchive(store: ImageStore, archive: Readable, label: string, maxBytes: number): Promise<StoredImage> {
  return store.holding(() => storeHeld(store, archive, label, maxBytes));
}

async function storeHeld(store: ImageStore, archive: Readable, label: string, maxBytes: number): Promise<StoredImage> {
  const staging = store.stagingDir();
  mkdirSync(staging, { mode: 0o700 });
  try {
    await stageArchive(archive, staging, maxBytes);
    return existsSync(join(staging, 'index.json')) ? await storeOciLayout(store, staging, label) : await storeDockerSave(store, staging, label);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** An image archive's files: its index or manifest, configs, and a blob or a directory per layer. */
const MAX_ARCHIVE_ENTRIES = 10_000;

async function stageArchive(archive: Readable, dir: string, maxBytes: number): Promise<void> {
  const extract = tarExtract();
  const feeding = pipeline(archive, extract).then(
    () => null,
    (error: Error) => error,
  );
  let total = 0;
  let entries = 0;
  let refused: unknown = null;
  try {
    for await (const entry of extract) {
      const { header } = entry;
      if (++entries > MAX_ARCHIVE_ENTRIES) throw failure('image.too_large', `the archive has more than ${MAX_ARCHIVE_ENTRIES} entries: an image archive holds a few per layer`);
      const parts = header.name.split('/').filter((part) => part !== '' && part !== '.');
      if (header.name.startsWith('/') || parts.includes('..') || parts.length === 0 || parts.length > 8)
        throw failure('image.invalid', `the archive's entry ${JSON.stringify(header.name.slice(0, 256))} is not a name of an image archive`);
      const path = join(dir, ...parts);
      if (header.type === 'directory') {
        mkdirSync(path, { recursive: true, mode: 0o700 });
      } else if (header.type === 'file') {
        total += header.size ?? 0;
        if (total > maxBytes) throw failure('image.too_large', `the archive holds more than templates.maxImageBytes (${maxBytes})`);
        mkdirSync(join(path, '..'), { recursive: true, mode: 0o700 });
        const fd = openSync(path, 'wx', 0o600);
        try {
          for await (const chunk of entry as AsyncIterable<Buffer>) writeSync(fd, chunk);
        } finally {
          closeSync(fd);
        }
        continue;
      }
      // Links and the rest are no part of an image archive's layout: skipped.
      for await (const _chunk of entry);
    }
  } catch (error) {
    refused = error;
    extract.destroy();
    archive.destroy();
  }
  const fed = await feeding;
  if (refused instanceof CodedError) throw refused;
  if (refused !== null || fed !== null) throw failure('image.invalid', `not a readable tar archive: ${((refused ?? fed) as Error).message}`);
}

/** An OCI image layout: index.json's manifest (an index resolved for linux/amd64), its blobs under blobs/. */
async function storeOciLayout(store: ImageStore, dir: string, label: string): Promise<StoredImage> {
  let body = readJson(dir, 'index.json', label);
  let digest: string | null = null;
  // index.json is an index; a manifest it lists may be one too (a multi-platform image).
  for (let depth = 0; isIndex(body, ''); depth++) {
    if (depth > 2) throw failure('image.invalid', `${label}'s indexes nest too deep`);
    const manifests = (body as { manifests?: unknown[] }).manifests ?? [];
    digest =
      manifests.length === 1 && !(manifests[0] as { platform?: unknown }).platform
        ? checkedDigest((manifests[0] as { digest?: unknown }).digest, label)
        : platformManifest(body, label);
    body = parseJson(verifiedBlob(dir, digest, label), `${label}'s manifest ${digest}`);
  }
  if (digest === null) throw failure('image.invalid', `${label}'s index.json lists no manifest`);
  const manifest = parseManifest(body, label);
  const configBytes = verifiedBlob(dir, manifest.config.digest, label);
  return storeLayers(store, label, digest, manifest, configBytes, (layer) => blobPath(dir, layer.digest, label), true);
}

/** `docker save`: manifest.json's first image, its config, and its layers as named there. */
async function storeDockerSave(store: ImageStore, dir: string, label: string): Promise<StoredImage> {
  const list = readJson(dir, 'manifest.json', label) as { Config?: unknown; Layers?: unknown }[];
  const image = Array.isArray(list) ? list[0] : undefined;
  if (!image || typeof image.Config !== 'string' || !Array.isArray(image.Layers) || !image.Layers.every((layer) => typeof layer === 'string'))
    throw failure('image.invalid', `${label} is neither an OCI image layout (index.json) nor docker save output (manifest.json with Config and Layers)`);
  const configPath = archivePath(dir, image.Config, label);
  const configBytes = readFileSync(configPath);
  const configDigest = sha256Digest(configBytes);
  const manifest: ImageManifest = {
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: configDigest, size: configBytes.length },
    layers: (image.Layers as string[]).map((layer) => ({
      mediaType: 'layer',
      digest: layer,
      size: lstatSync(archivePath(dir, layer, label)).size,
      compressed: isGzip(archivePath(dir, layer, label)),
    })),
  };
  // docker save has no manifest digest: the image is named by its config's, as Docker names it.
  return storeLayers(store, label, configDigest, manifest, configBytes, (layer) => archivePath(dir, layer.digest, label), false);
}

/**
 * Stores each layer (from `layerFile`) and the image's record. `layersByDigest`: the manifest's
 * layer digests are of the files (OCI), so each is checked; docker save names files instead.
 */
async function storeLayers(
  store: ImageStore,
  label: string,
  digest: string,
  manifest: ImageManifest,
  configBytes: Buffer,
  layerFile: (layer: ImageManifest['layers'][number]) => string,
  layersByDigest: boolean,
): Promise<StoredImage> {
  const config = parseConfig(parseJson(configBytes, `${label}'s config`), manifest.layers.length, label);
  const layers: StoredImage['layers'] = [];
  let budget = store.maxImageBytes;
  for (const [index, layer] of manifest.layers.entries()) {
    const stored = await store.ensureLayer(config.diffIds[index]!, budget, async (tree, limits) => {
      const unpacked = await unpackLayer(createReadStream(layerFile(layer)), layer.compressed, tree, limits);
      if (layersByDigest && unpacked.blobDigest !== layer.digest)
        throw failure('image.digest_mismatch', `layer ${index} of ${label} is ${unpacked.blobDigest}, not ${layer.digest}`);
      return unpacked;
    });
    budget -= stored.bytes;
    layers.push(stored);
  }
  return store.record({ digest, source: `archive:${label}`, config: config.run, layers });
}

function blobPath(dir: string, digest: string, label: string): string {
  const path = join(dir, 'blobs', 'sha256', hex(checkedDigest(digest, label)));
  // A regular file staged from the archive: never a device, a FIFO or a link to one.
  if (!lstatSync(path, { throwIfNoEntry: false })?.isFile()) throw failure('image.invalid', `${label} has no blob ${digest}`);
  return path;
}

function verifiedBlob(dir: string, digest: string, label: string): Buffer {
  const bytes = readFileSync(blobPath(dir, digest, label));
  if (sha256Digest(bytes) !== digest) throw failure('image.digest_mismatch', `${label}'s blob ${digest} does not match its digest`);
  return bytes;
}

function archivePath(dir: string, name: string, label: string): string {
  const parts = name.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.length === 0 || parts.includes('..')) throw failure('image.invalid', `${label} names ${JSON.stringify(name)}, outside the archive`);
  const path = join(dir, ...parts);
  if (!lstatSync(path, { throwIfNoEntry: false })?.isFile()) throw failure('image.invalid', `${label} has no ${name}`);
  return path;
}

function readJson(dir: string, name: string, label: string): unknown {
  return parseJson(readFileSync(archivePath(dir, name, label)), `${label}'s ${name}`);
}

/** Whether a file starts as gzip data does. */
export function isGzip(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const magic = Buffer.alloc(2);
    return readSync(fd, magic, 0, 2, 0) === 2 && magic[0] === 0x1f && magic[1] === 0x8b;
  } finally {
    closeSync(fd);
  }
}
