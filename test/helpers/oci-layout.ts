import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { pack, type Header } from 'tar-stream';
import type { Registry } from './oci-registry.js';

/**
 * One entry of a layer's tar, written as given: any type, any name (`../x`, `/x`, a whiteout),
 * owner and mode, for the fixtures that must hold what a careful writer never would.
 */
export interface LayerEntry {
  name: string;
  /** 'file' unless given. */
  type?: Header['type'];
  content?: string | Buffer;
  /** 0644 for a file, 0755 for a directory, unless given. */
  mode?: number;
  uid?: number;
  gid?: number;
  /** A link's target: a symlink's as it is read, a hard link's as another entry's name. */
  linkname?: string;
  devmajor?: number;
  devminor?: number;
}

/** A layer as a registry holds it: the gzip'ed tar (its digest names the blob) and the tar's own digest (the config's diff_id). */
export interface Layer {
  blob: Buffer;
  digest: string;
  diffId: string;
}

/** The runtime part of an image config (the OCI image spec's `config` object). */
export interface RunConfig {
  Env?: string[];
  Cmd?: string[];
  WorkingDir?: string;
  User?: string;
}

/** One image of a layout: a manifest, its config and its layers. */
export interface ImageSpec {
  layers: readonly Layer[];
  config?: RunConfig;
  /** amd64 unless given. */
  architecture?: string;
}

/** An image written as an OCI image layout directory, under a tag, and where it goes in a registry. */
export interface OciImage {
  layoutDir: string;
  /** The repository name in a registry, `agent-runner-test/...`. */
  name: string;
  tag: string;
  /** The digest of the layout's top manifest (an image index for a multi-arch image): what a registry serves for name:tag. */
  digest: string;
  /**
   * The one fixture whose blob does not match its digest (hostileLayers' `bad-digest`): the layout
   * holds `served` under `digest`; `original` is what the digest is of, pushed so that the registry
   * accepts the image (it verifies every upload) and then replaced in its storage.
   */
  corruptBlob?: { digest: string; original: Buffer; served: Buffer };
}

export const MEDIA_TYPES = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { architecture: string; os: string };
}

const execFileAsync = promisify(execFile);

/** Every entry's time: the same entries make the same bytes, so a layer's digest is stable across runs and machines. */
const EPOCH = new Date(0);

/** A tar of `entries` in order, built with tar-stream (which writes a pax header for a name ustar cannot hold: long, non-ASCII). */
export async function tarOf(entries: readonly LayerEntry[]): Promise<Buffer> {
  const archive = pack();
  const done = buffer(archive);
  for (const entry of entries) {
    const type = entry.type ?? 'file';
    const header = {
      name: entry.name,
      type,
      mode: entry.mode ?? (type === 'directory' ? 0o755 : 0o644),
      uid: entry.uid ?? 0,
      gid: entry.gid ?? 0,
      mtime: EPOCH,
      ...(entry.linkname !== undefined ? { linkname: entry.linkname } : {}),
      ...(entry.devmajor !== undefined ? { devmajor: entry.devmajor, devminor: entry.devminor ?? 0 } : {}),
    };
    await new Promise<void>((resolve, reject) => {
      const callback = (error?: Error | null) => (error ? reject(error) : resolve());
      if (type === 'file') archive.entry(header, Buffer.from(entry.content ?? ''), callback);
      else archive.entry(header, callback);
    });
  }
  archive.finalize();
  return done;
}

export function sha256(bytes: Buffer | string): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** `tar`, gzip'ed: at `level` 0 the gzip's length depends only on the tar's (hostileLayers' bad-digest needs two of one length). */
export function layerOfTar(tar: Buffer, level = 6): Layer {
  const blob = gzipSync(tar, { level });
  return { blob, digest: sha256(blob), diffId: sha256(tar) };
}

export async function layerOf(entries: readonly LayerEntry[]): Promise<Layer> {
  return layerOfTar(await tarOf(entries));
}

/**
 * The entries of the host's tree at `hostPath`, named under `imagePath` (no leading slash, as in
 * a tar): directories, files (contents read) and symlinks, owned by root, modes as on the host;
 * a name `skip` says yes to is left out with all under it.
 */
export function treeEntries(hostPath: string, imagePath: string, skip: (name: string) => boolean = () => false): LayerEntry[] {
  const stat = lstatSync(hostPath);
  const mode = stat.mode & 0o7777;
  if (stat.isSymbolicLink()) return [{ name: imagePath, type: 'symlink', linkname: readlinkSync(hostPath) }];
  if (stat.isFile()) return [{ name: imagePath, mode, content: readFileSync(hostPath) }];
  if (!stat.isDirectory()) throw new Error(`${hostPath}: neither a file, a directory nor a symlink`);
  const children = readdirSync(hostPath)
    .filter((name) => !skip(name))
    .sort();
  return [{ name: imagePath, type: 'directory', mode }, ...children.flatMap((name) => treeEntries(join(hostPath, name), `${imagePath}/${name}`, skip))];
}

function writeBlob(layoutDir: string, mediaType: string, bytes: Buffer | string): Descriptor {
  const digest = sha256(bytes);
  writeFileSync(blobPath(layoutDir, digest), bytes);
  return { mediaType, digest, size: Buffer.byteLength(bytes) };
}

export function blobPath(layoutDir: string, digest: string): string {
  return join(layoutDir, 'blobs', ...digest.split(':'));
}

/** Writes an image's layers, config and manifest as blobs; the manifest's descriptor, with the image's platform. */
function writeManifest(layoutDir: string, image: ImageSpec): Descriptor {
  const architecture = image.architecture ?? 'amd64';
  const config = writeBlob(
    layoutDir,
    MEDIA_TYPES.config,
    JSON.stringify({
      created: EPOCH.toISOString(),
      architecture,
      os: 'linux',
      config: image.config ?? {},
      rootfs: { type: 'layers', diff_ids: image.layers.map((layer) => layer.diffId) },
      history: image.layers.map(() => ({ created: EPOCH.toISOString(), created_by: 'agent-runner test fixture' })),
    }),
  );
  const layers = image.layers.map((layer) => writeBlob(layoutDir, MEDIA_TYPES.layer, layer.blob));
  const manifest = writeBlob(layoutDir, MEDIA_TYPES.manifest, JSON.stringify({ schemaVersion: 2, mediaType: MEDIA_TYPES.manifest, config, layers }));
  return { ...manifest, platform: { architecture, os: 'linux' } };
}

/**
 * Writes an OCI image layout at `layoutDir` (oci-layout, index.json, blobs/sha256/) holding
 * `images` under `tag`: one image as its manifest, more as an image index of their platforms.
 */
export function writeLayout(layoutDir: string, name: string, tag: string, images: readonly ImageSpec[]): OciImage {
  mkdirSync(join(layoutDir, 'blobs', 'sha256'), { recursive: true });
  const manifests = images.map((image) => writeManifest(layoutDir, image));
  const top =
    manifests.length === 1
      ? { mediaType: manifests[0]!.mediaType, digest: manifests[0]!.digest, size: manifests[0]!.size }
      : writeBlob(layoutDir, MEDIA_TYPES.index, JSON.stringify({ schemaVersion: 2, mediaType: MEDIA_TYPES.index, manifests }));
  writeFileSync(join(layoutDir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(layoutDir, 'index.json'),
    JSON.stringify({ schemaVersion: 2, mediaType: MEDIA_TYPES.index, manifests: [{ ...top, annotations: { 'org.opencontainers.image.ref.name': tag } }] }),
  );
  return { layoutDir, name, tag, digest: top.digest };
}

/**
 * Runs skopeo, its output; without blocking this process: a registry with token auth sends skopeo
 * to a token server that is this process's own (oci-registry.ts).
 */
export async function skopeo(...args: string[]): Promise<string> {
  // --insecure-policy: the host's /etc/containers/policy.json is no business of the fixtures.
  const { stdout } = await execFileAsync('skopeo', ['--insecure-policy', ...args], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/** The skopeo transport of an image's layout: `oci:DIR:TAG`. */
export function ociReference(image: OciImage): string {
  return `oci:${image.layoutDir}:${image.tag}`;
}

/** The value of skopeo's --creds (--src-creds, --dest-creds) for a registry with auth: user:password. */
export function skopeoCreds(registry: Registry): string | undefined {
  return registry.credentials && `${registry.credentials.username}:${registry.credentials.password}`;
}

/** Where pushImage puts the image in the registry: `HOST/NAME:TAG`. */
export function registryReference(registry: Registry, image: OciImage): string {
  return `${registry.host}/${image.name}:${image.tag}`;
}

/**
 * Pushes the image with skopeo (every platform of an index, and the manifests' bytes as they are,
 * so that the registry serves `image.digest`); `HOST/NAME:TAG`, its reference there.
 */
export async function pushImage(image: OciImage, registry: Registry): Promise<string> {
  const reference = registryReference(registry, image);
  const creds = skopeoCreds(registry);
  const push = () =>
    skopeo('copy', '--all', '--preserve-digests', '--dest-tls-verify=false', ...(creds ? ['--dest-creds', creds] : []), ociReference(image), `docker://${reference}`);
  const corrupt = image.corruptBlob;
  if (!corrupt) {
    await push();
    return reference;
  }
  const inLayout = blobPath(image.layoutDir, corrupt.digest);
  writeFileSync(inLayout, corrupt.original);
  try {
    await push();
  } finally {
    writeFileSync(inLayout, corrupt.served);
  }
  const hex = corrupt.digest.slice('sha256:'.length);
  writeFileSync(join(registry.storageDir, 'docker', 'registry', 'v2', 'blobs', 'sha256', hex.slice(0, 2), hex, 'data'), corrupt.served);
  return reference;
}

/** The image as `docker save` writes it (manifest.json, repositories, the config and each layer's tar), by skopeo's docker-archive transport. */
export async function dockerArchive(image: OciImage, file: string): Promise<void> {
  await skopeo('copy', ociReference(image), `docker-archive:${file}:${image.name}:${image.tag}`);
}

/** The image's OCI layout as one tar, as an upload of an `oci-archive` holds it. */
export function ociArchive(image: OciImage, file: string): void {
  execFileSync('tar', ['-cf', file, '-C', image.layoutDir, 'oci-layout', 'index.json', 'blobs']);
}
