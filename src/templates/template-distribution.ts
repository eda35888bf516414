import { createReadStream } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { MEDIA, ociConfig } from '../images/image-manifest.js';
import { parseImageReference, type ImageReference } from '../images/image-reference.js';
import type { ImageStore, StoredImage } from '../images/image-store.js';
import { packLayer, type PackedLayer } from '../images/layer-pack.js';
import { failure, RegistryClient, type RegistryOptions } from '../images/registry-client.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import type { ImageTemplate } from './image-template.js';
import { sha256Digest } from '../images/digest.js';

/** The manifest annotation that carries a template's record (its name, source, start command, maker). */
const RECORD_ANNOTATION = 'dev.agent-runner.template';
const CONFIG_MEDIA = 'application/vnd.oci.image.config.v1+json';
const LAYER_MEDIA = 'application/vnd.oci.image.layer.v1.tar+gzip';
/** Beside a stored layer's tree: its packed form's digests, so a layer is packed once however often it is published. */
const PACKED_NOTE = 'packed.json';
const MANIFEST_BYTES = 4 << 20;
/** Tags read in one listing: templates of one cluster. */
const MAX_TEMPLATES = 10_000;
/**
 * A template's key (`name` or `name:tag`) as a registry tag, which holds no colon: names and tags
 * are lowercase, so an uppercase separator never stands for anything else.
 */
const TAG_SEPARATOR = '_T_';
const registryTag = (key: string) => key.replace(':', TAG_SEPARATOR);

/**
 * A cluster's templates in one OCI registry repository (`templates.distribution`): each template
 * an image tagged with its name, its record in the manifest's annotations. The machine that makes
 * a template publishes it (its layers packed from the store, each blob sent once); the others
 * read the record when a create or a listing names the template and pull its layers into their
 * own store when a sandbox first needs them, through the same pull as any image. Nothing else
 * is shared between machines: a registry is the engine for moving layers, and holds each once.
 */
export class TemplateDistribution {
  private readonly repository: ImageReference;

  constructor(
    repository: string,
    private readonly options: RegistryOptions,
    private readonly store: ImageStore,
  ) {
    const parsed = parseImageReference(repository);
    if (parsed.digest !== null || parsed.tag !== 'latest' || repository.endsWith(':latest'))
      throw new Error(`templates.distribution is a repository (host[:port]/path), without a tag or digest: ${repository}`);
    this.repository = { ...parsed, tag: null };
  }

  /** Where a template's image is, by the digest it was published as: for a pull. */
  reference(digest: string): ImageReference {
    return { ...this.repository, digest };
  }

  /** Publishes `image` as template `template.name`, the record in its manifest; returns the manifest's digest. */
  async publish(template: Omit<ImageTemplate, 'published'>, image: StoredImage): Promise<string> {
    const client = new RegistryClient({ ...this.repository, tag: registryTag(template.name) }, { ...this.options, push: true });
    const staging = this.store.stagingDir();
    await mkdir(staging, { recursive: true, mode: 0o700 });
    try {
      const layers: PackedLayer[] = [];
      for (const tree of this.store.layerTrees(image)) layers.push(await this.sendLayer(client, tree, join(staging, `${layers.length}.tar.gz`)));
      const config = Buffer.from(
        JSON.stringify(
          ociConfig(
            image.config,
            layers.map((layer) => layer.diffId),
          ),
        ),
      );
      const configDigest = sha256Digest(config);
      if (!(await client.hasBlob(configDigest))) await client.putBlob(configDigest, () => ({ body: config, length: config.length }));
      const { image: _digest, ...record } = template;
      const manifest = Buffer.from(
        JSON.stringify({
          schemaVersion: 2,
          mediaType: MEDIA.ociManifest,
          config: { mediaType: CONFIG_MEDIA, digest: configDigest, size: config.length },
          layers: layers.map((layer) => ({ mediaType: LAYER_MEDIA, digest: layer.digest, size: layer.size })),
          annotations: { [RECORD_ANNOTATION]: JSON.stringify(record) },
        }),
      );
      await client.putManifest(registryTag(template.name), manifest, MEDIA.ociManifest);
      return sha256Digest(manifest);
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  }

  /** The digest template `name` (a key) is published as now, or null when the repository has no such template. */
  current(name: string): Promise<string | null> {
    return this.client(name).manifestDigest(registryTag(name), [MEDIA.ociManifest]);
  }

  /** The keys of every template published. */
  async names(): Promise<string[]> {
    return (await this.client(null).tags(MAX_TEMPLATES)).map((tag) => tag.replace(TAG_SEPARATOR, ':'));
  }

  /** Template `name`'s record as published under `digest`, its image that digest (pulled when a sandbox needs it). */
  async record(name: string, digest: string): Promise<ImageTemplate> {
    const { body } = await this.client(name).manifest(digest, [MEDIA.ociManifest], MANIFEST_BYTES);
    const what = `template ${name} in ${this.repository.registry}/${this.repository.repository}`;
    let record: Partial<ImageTemplate>;
    try {
      const annotation = (JSON.parse(body.toString('utf8')) as { annotations?: Record<string, unknown> }).annotations?.[RECORD_ANNOTATION];
      record = JSON.parse(String(annotation)) as Partial<ImageTemplate>;
    } catch {
      throw failure('image.invalid', `${what} carries no template record: it was not published by agent-runner`);
    }
    if (record.name !== name || typeof record.source !== 'string' || typeof record.config !== 'object' || typeof record.created_at !== 'string')
      throw failure('image.invalid', `${what} carries a record of another template or of none`);
    return { ...(record as ImageTemplate), image: digest, published: digest };
  }

  /** Removes a template's publication (the registry keeps blobs other manifests hold); false when it had none. */
  withdraw(name: string, digest: string): Promise<boolean> {
    return new RegistryClient({ ...this.repository, tag: registryTag(name) }, { ...this.options, push: true }).deleteManifest(digest);
  }

  private client(name: string | null): RegistryClient {
    return new RegistryClient({ ...this.repository, tag: name && registryTag(name) }, this.options);
  }

  /** One layer packed (or its packed digests known from before) and sent unless the registry holds it. */
  private async sendLayer(client: RegistryClient, tree: string, file: string): Promise<PackedLayer> {
    const note = join(dirname(tree), PACKED_NOTE);
    const known = await readFile(note, 'utf8').then(
      (text) => JSON.parse(text) as PackedLayer,
      () => null,
    );
    if (known && (await client.hasBlob(known.digest))) return known;
    const packed = await packLayer(tree, file);
    if (!(await client.hasBlob(packed.digest))) await client.putBlob(packed.digest, () => ({ body: createReadStream(file), length: packed.size }));
    await writeFileAtomic(note, `${JSON.stringify(packed)}\n`);
    return packed;
  }
}
