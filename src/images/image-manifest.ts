import type { ImageRunConfig } from '../contract/templates.js';
import { DIGEST } from './image-reference.js';
import { failure } from './registry-client.js';

/** The media types a pull asks for and reads: OCI's and Docker's (schema 2), indexes and manifests. */
export const MEDIA = {
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
} as const;
export const MANIFEST_ACCEPT = [MEDIA.ociIndex, MEDIA.ociManifest, MEDIA.dockerList, MEDIA.dockerManifest] as const;

const GZIP_LAYERS = new Set(['application/vnd.oci.image.layer.v1.tar+gzip', 'application/vnd.docker.image.rootfs.diff.tar.gzip']);
const TAR_LAYERS = new Set(['application/vnd.oci.image.layer.v1.tar', 'application/vnd.docker.image.rootfs.diff.tar']);

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

/** A manifest of one platform: its config blob and its layers, bottom first. */
export interface ImageManifest {
  config: Descriptor;
  layers: (Descriptor & { compressed: boolean })[];
}

/** What a sandbox of the image starts with, from the config's `config` (Docker's names). */
export type { ImageRunConfig };

export interface ImageConfig {
  diffIds: string[];
  run: ImageRunConfig;
}

/** The platform pulled: the service runs linux/amd64 sandboxes only. */
export const PLATFORM = { os: 'linux', architecture: 'amd64' } as const;

/** The digest of the linux/amd64 manifest an index lists; image.not_found when it lists none. */
export function platformManifest(index: unknown, what: string): string {
  const manifests = (index as { manifests?: unknown }).manifests;
  if (!Array.isArray(manifests)) throw failure('image.invalid', `${what} is an index without a manifests list`);
  const found = manifests.find(
    (entry: { platform?: { os?: unknown; architecture?: unknown } }) => entry?.platform?.os === PLATFORM.os && entry.platform.architecture === PLATFORM.architecture,
  ) as { digest?: unknown } | undefined;
  if (!found) throw failure('image.not_found', `${what} has no image for ${PLATFORM.os}/${PLATFORM.architecture}`);
  return checkedDigest(found.digest, what);
}

/** Whether a manifest body (with its media type, when the registry said one) is an index of platforms. */
export function isIndex(body: unknown, mediaType: string): boolean {
  const type = (body as { mediaType?: unknown }).mediaType ?? mediaType;
  return type === MEDIA.ociIndex || type === MEDIA.dockerList || (type === '' && Array.isArray((body as { manifests?: unknown }).manifests));
}

export function parseManifest(body: unknown, what: string): ImageManifest {
  const manifest = body as { schemaVersion?: unknown; config?: unknown; layers?: unknown };
  if (manifest?.schemaVersion !== 2) throw failure('image.unsupported', `${what} is not a schema 2 manifest (Docker's schema 1 is not read)`);
  if (!Array.isArray(manifest.layers)) throw failure('image.invalid', `${what} has no layers list`);
  return {
    config: descriptor(manifest.config, `${what}'s config`),
    layers: manifest.layers.map((layer: unknown, index) => {
      const checked = descriptor(layer, `${what}'s layer ${index}`);
      if (GZIP_LAYERS.has(checked.mediaType)) return { ...checked, compressed: true };
      if (TAR_LAYERS.has(checked.mediaType)) return { ...checked, compressed: false };
      throw failure('image.unsupported', `${what}'s layer ${index} is ${checked.mediaType}: only tar and tar+gzip layers are read here`);
    }),
  };
}

export function parseConfig(body: unknown, layerCount: number, what: string): ImageConfig {
  const config = body as { rootfs?: { diff_ids?: unknown }; config?: Record<string, unknown> | null; os?: unknown; architecture?: unknown };
  if (config?.os !== undefined && config.os !== PLATFORM.os) throw failure('image.unsupported', `${what} is an image for ${String(config.os)}`);
  if (config?.architecture !== undefined && config.architecture !== PLATFORM.architecture)
    throw failure('image.unsupported', `${what} is an image for ${String(config.architecture)}`);
  const diffIds = config?.rootfs?.diff_ids;
  if (!Array.isArray(diffIds) || diffIds.length !== layerCount) throw failure('image.invalid', `${what}'s rootfs.diff_ids do not list its ${layerCount} layers`);
  const run = config.config ?? {};
  const strings = (value: unknown): string[] | null => (Array.isArray(value) && value.every((item) => typeof item === 'string') ? (value as string[]) : null);
  const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : null);
  const labels = run.Labels && typeof run.Labels === 'object' ? (run.Labels as Record<string, unknown>) : {};
  return {
    diffIds: diffIds.map((id: unknown) => checkedDigest(id, `${what}'s diff id`)),
    run: {
      env: strings(run.Env) ?? [],
      entrypoint: strings(run.Entrypoint),
      cmd: strings(run.Cmd),
      workingDir: text(run.WorkingDir),
      user: text(run.User),
      exposedPorts: run.ExposedPorts && typeof run.ExposedPorts === 'object' ? Object.keys(run.ExposedPorts) : [],
      labels: Object.fromEntries(Object.entries(labels).filter((entry): entry is [string, string] => typeof entry[1] === 'string')),
    },
  };
}

/** An image config of `run` over the layers `diffIds`: what parseConfig reads back, for an image this service publishes. */
export function ociConfig(run: ImageRunConfig, diffIds: readonly string[]): Record<string, unknown> {
  return {
    ...PLATFORM,
    config: {
      Env: run.env,
      ...(run.entrypoint && { Entrypoint: run.entrypoint }),
      ...(run.cmd && { Cmd: run.cmd }),
      ...(run.workingDir !== null && { WorkingDir: run.workingDir }),
      ...(run.user !== null && { User: run.user }),
      ExposedPorts: Object.fromEntries(run.exposedPorts.map((port) => [port, {}])),
      Labels: run.labels,
    },
    rootfs: { type: 'layers', diff_ids: diffIds },
  };
}

function descriptor(value: unknown, what: string): Descriptor {
  const { mediaType, digest, size } = (value ?? {}) as { mediaType?: unknown; digest?: unknown; size?: unknown };
  if (typeof mediaType !== 'string' || typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0)
    throw failure('image.invalid', `${what} is not a descriptor (mediaType, digest, size)`);
  return { mediaType, digest: checkedDigest(digest, what), size };
}

export function checkedDigest(value: unknown, what: string): string {
  if (typeof value !== 'string' || !DIGEST.test(value)) throw failure('image.unsupported', `${what} has digest ${JSON.stringify(value)}: only sha256 digests are read`);
  return value;
}

/** An image config's `Env` (NAME=value pairs) as a map; a pair without a name is no variable. */
export function imageEnvironment(pairs: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs) {
    const equals = pair.indexOf('=');
    if (equals > 0) env[pair.slice(0, equals)] = pair.slice(equals + 1);
  }
  return env;
}
