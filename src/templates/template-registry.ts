import { makePrivateDirSync } from '../util/private-dir.js';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { TemplateStoreSettings } from '../config/schema.js';
import { CodedError, contractError } from '../contract/errors.js';
import { storeImageArchive } from '../images/image-archive.js';
import { parseImageReference, type ImageReference } from '../images/image-reference.js';
import { ImageStore, type StoredImage } from '../images/image-store.js';
import type { RegistryOptions } from '../images/registry-client.js';
import { TemplateDistribution } from './template-distribution.js';
import type { ImageTemplate } from './image-template.js';
import { keyParts, templateKey } from './template-reference.js';
import type { TemplateStart } from '../contract/templates.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { visibleTo } from '../util/tenant.js';
import { sha256Digest } from '../images/digest.js';
import { withSandboxUser } from './sandbox-user.js';

/** A user name and password a registry takes (basic auth, or for a token from its realm). */
export interface RegistryCredentials {
  username: string;
  password: string;
}

/**
 * The templates made of images on this machine, and the image store under them:
 *   <dir>/images/...            the store (images/image-store.ts)
 *   <dir>/templates/<name>.json one ImageTemplate, written whole (atomic rename)
 * Every process of a service (its front door, its sandbox host) opens the same directory: a
 * template made by one is read by the others from the disk at each lookup.
 *
 * With `templates.distribution`, the templates are the cluster's: each one made here is
 * published to that repository before it is recorded, and `lookup`/`listAll` read the
 * repository first, so a template made on any machine is found on every other (its record kept
 * here, its layers pulled into this store when a sandbox first needs them: `layers`), and one
 * deleted or replaced anywhere is so here at the next lookup.
 */
export class TemplateRegistry {
  readonly images: ImageStore;
  private readonly templatesDir: string;
  private readonly distribution: TemplateDistribution | null;

  constructor(
    readonly dir: string,
    private readonly settings: TemplateStoreSettings,
  ) {
    makePrivateDirSync(dir);
    this.images = new ImageStore(join(dir, 'images'), { maxImageBytes: settings.maxImageBytes, maxEntries: settings.maxImageEntries });
    this.templatesDir = join(dir, 'templates');
    mkdirSync(this.templatesDir, { recursive: true, mode: 0o700 });
    this.distribution = settings.distribution === null ? null : new TemplateDistribution(settings.distribution, this.registryOptions(), this.images);
  }

  /** Makes (or replaces) template `name` (or `name:tag`) from an image pulled by reference. */
  async fromReference(name: string, reference: string, apiKey?: string): Promise<ImageTemplate> {
    const key = checkedKey(name);
    return this.save(key, await this.pullImage(parseImageReference(reference)), apiKey);
  }

  /** Pulls an image into the store, with the registries' settings; `credentials` (a build's own) before the configured ones for its registry. */
  pullImage(reference: ImageReference, credentials?: RegistryCredentials): Promise<StoredImage> {
    return this.images.pull(reference, this.registryOptions(credentials && { [reference.registry]: credentials }));
  }

  private registryOptions(credentials: RegistryOptions['credentials'] = {}): RegistryOptions {
    return { credentials: { ...this.settings.registries, ...credentials }, insecureRegistries: this.settings.insecureRegistries, timeoutMs: this.settings.registryTimeoutMs };
  }

  /** Makes (or replaces) template `name` from an image already stored (a build's), with the start command its sandboxes run. */
  fromImage(name: string, image: StoredImage, apiKey?: string, start?: TemplateStart, buildId?: string): Promise<ImageTemplate> {
    return this.save(checkedKey(name), image, apiKey, start, buildId);
  }

  /** Makes (or replaces) template `name` from an uploaded image archive (docker save, or an OCI layout tar). */
  async fromArchive(name: string, archive: Readable, label: string, apiKey?: string): Promise<ImageTemplate> {
    const key = checkedKey(name);
    return this.save(key, await storeImageArchive(this.images, archive, label, this.settings.maxImageBytes), apiKey);
  }

  /**
   * Gives each of `tags` of template `target`'s name (`name:tag`) the image `target` has now, as
   * E2B's assignTags does; the tags another key made are not taken over. Returns the target.
   */
  async assignTags(target: string, tags: readonly string[], apiKey?: string): Promise<ImageTemplate> {
    const source = await this.lookup(target);
    if (!source) throw notFound(target);
    const keys = tags.map((tag) => checkedKey(`${keyParts(source.name).name}:${tag}`));
    await this.layers(source);
    const image = this.images.image(source.image)!;
    for (const key of keys) await this.save(key, image, apiKey, source.start, source.build_id);
    return source;
  }

  /** Removes tags of template `name` (the default one too, if named); each must be one the key may change. */
  async removeTags(name: string, tags: readonly string[], apiKey?: string): Promise<void> {
    const keys = tags.map((tag) => checkedKey(`${name}:${tag}`));
    const found = await Promise.all(keys.map((key) => this.lookup(key)));
    const missing = keys.find((_key, index) => found[index] === null);
    if (missing !== undefined) throw notFound(missing);
    for (const template of found) if (!visibleTo(apiKey, template!.api_key)) throw otherKeys(template!.name);
    for (const key of keys) {
      const deleted = await this.delete(key);
      // Layers left behind by a failed removal go with the next template that lets go of them.
      if (deleted) void deleted.layersGone.catch(() => undefined);
    }
  }

  /** The records of every tag of template `name` (the default one among them, if it has one). */
  async tagsOf(name: string): Promise<ImageTemplate[]> {
    return (await this.listAll()).filter((template) => keyParts(template.name).name === name);
  }

  /**
   * Template `name` as the cluster has it now: this machine's record, brought up to date from the
   * distribution repository first (made, replaced or deleted elsewhere). A repository that cannot
   * be reached leaves the record as it is here.
   */
  async lookup(name: string): Promise<ImageTemplate | null> {
    const key = templateKey(name);
    if (key === null) return null;
    if (this.distribution) await this.follow(this.distribution, key);
    return this.get(key);
  }

  /** Every template the cluster has (list, after a lookup of each published one). */
  async listAll(): Promise<ImageTemplate[]> {
    const { distribution } = this;
    if (distribution) {
      const names = await distribution.names().catch(() => null);
      if (names !== null) {
        const published = new Set(names.filter((name) => templateKey(name) === name));
        // Withdrawn elsewhere: a record here that came from the repository goes too.
        for (const template of this.list()) if (template.published && !published.has(template.name)) this.forgetRecord(template.name);
        await Promise.all([...published].map((name) => this.follow(distribution, name)));
      }
    }
    return this.list();
  }

  /** This machine's record of `name` made what the repository says (unreachable: left as it is). */
  private async follow(distribution: TemplateDistribution, name: string): Promise<void> {
    const digest = await distribution.current(name).catch(() => undefined);
    if (digest === undefined) return;
    const here = this.get(name);
    if (digest === null) {
      if (here?.published) this.forgetRecord(name);
      return;
    }
    if (here?.published === digest) return;
    const record = await distribution.record(name, digest);
    await writeFileAtomic(join(this.templatesDir, `${name}.json`), `${JSON.stringify(record, null, 2)}\n`);
    if (here && here.image !== record.image) void this.forgetUnheld(here.image).catch(() => undefined);
  }

  private forgetRecord(name: string): void {
    const template = this.get(name);
    rmSync(join(this.templatesDir, `${name}.json`), { force: true });
    if (template) void this.forgetUnheld(template.image).catch(() => undefined);
  }

  /** This machine's record of template `name` (or `name:tag`), as it is here. */
  get(name: string): ImageTemplate | null {
    const key = templateKey(name);
    if (key === null) return null;
    try {
      return JSON.parse(readFileSync(join(this.templatesDir, `${key}.json`), 'utf8')) as ImageTemplate;
    } catch {
      return null;
    }
  }

  list(): ImageTemplate[] {
    return readdirSync(this.templatesDir)
      .filter((file) => file.endsWith('.json'))
      .map((file) => this.get(file.slice(0, -'.json'.length)))
      .filter((template): template is ImageTemplate => template !== null)
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * Deletes a template, then its image's layers when no other template holds them (once no pull,
   * import or build is under way: `layersGone`); false: none.
   */
  async delete(name: string): Promise<{ layersGone: Promise<void> } | false> {
    const template = await this.lookup(name);
    if (!template) return false;
    // Withdrawn from the cluster first: a template that stays published would come back here.
    if (template.published && this.distribution) await this.distribution.withdraw(template.name, template.published);
    rmSync(join(this.templatesDir, `${template.name}.json`), { force: true });
    return { layersGone: this.forgetUnheld(template.image) };
  }

  /**
   * The host directories of a template's layers, bottom first: a template published from another
   * machine has its image pulled into this store first. template.not_found when its image is gone.
   */
  async layers(template: ImageTemplate): Promise<string[]> {
    const { distribution } = this;
    if (template.published && distribution && !this.images.image(template.image)) await this.images.pull(distribution.reference(template.published), this.registryOptions());
    const image = this.images.image(template.image);
    if (!image)
      throw new CodedError(
        contractError('template.not_found', `template ${JSON.stringify(template.name)}'s image ${template.image} is no longer stored`, { template: template.name }),
      );
    return this.images.layerTrees(image);
  }

  /** Records template `name` (a key: templateKey's) of `image`, published first with a distribution. */
  private async save(name: string, given: StoredImage, apiKey?: string, start?: TemplateStart, buildId: string = randomUUID()): Promise<ImageTemplate> {
    const image = await this.withSandboxUser(given);
    const replaced = await this.lookup(name);
    // Checked again here, after a pull or an upload that took its time: another key's template
    // made meanwhile under the name is not taken over.
    if (replaced && !visibleTo(apiKey, replaced.api_key)) throw otherKeys(name);
    let template: ImageTemplate = {
      name,
      image: image.digest,
      source: image.source,
      config: image.config,
      bytes: image.bytes,
      created_at: new Date().toISOString(),
      build_id: buildId,
      ...(start && { start }),
      ...(apiKey !== undefined && { api_key: apiKey }),
    };
    // Published before it is recorded: a template of the cluster is one every machine finds.
    if (this.distribution) template = { ...template, published: await this.distribution.publish(template, image) };
    await writeFileAtomic(join(this.templatesDir, `${name}.json`), `${JSON.stringify(template, null, 2)}\n`);
    if (replaced && replaced.image !== image.digest) void this.forgetUnheld(replaced.image).catch(() => undefined);
    if (given !== image) void this.forgetUnheld(given.digest).catch(() => undefined);
    return template;
  }

  /**
   * The image as a template's sandboxes run it: with E2B's `user` added where it has none
   * (sandbox-user.ts), recorded as an image of its own, of the same source; the image itself
   * where it needs nothing (a build's, whose FROM had it added).
   */
  private withSandboxUser(image: StoredImage): Promise<StoredImage> {
    return this.images.holding(async () => {
      const layers = await withSandboxUser(this.images, image.layers);
      if (layers === image.layers) return image;
      const digest = sha256Digest(JSON.stringify([image.digest, 'sandbox user']));
      return this.images.record({ digest, source: image.source, config: image.config, layers });
    });
  }

  /** An image no template holds any more goes, with the layers no other image holds. */
  private async forgetUnheld(digest: string): Promise<void> {
    if (!this.list().some((template) => template.image === digest)) await this.images.remove(digest);
  }
}

/** The key of template reference `name`, or a refusal saying what a name and a tag are. */
function checkedKey(name: string): string {
  const key = templateKey(name);
  if (key === null)
    throw new CodedError(
      contractError(
        'validation.invalid_request',
        `template name ${JSON.stringify(name)}: lowercase letters, digits, '.', '_' and '-', at most 64, and a tag after a colon the same, at most 60`,
        { field: 'name' },
      ),
    );
  return key;
}

function notFound(name: string): CodedError {
  return new CodedError(contractError('template.not_found', `no template ${JSON.stringify(name)}`, { template: name }));
}

/** The registry of a configuration: `templates.dir`, or <stateDir>/templates. */
export function openTemplateRegistry(config: { stateDir: string; templates: TemplateStoreSettings }): TemplateRegistry {
  return new TemplateRegistry(config.templates.dir ?? join(config.stateDir, 'templates'), config.templates);
}

/** A template another API key made: only it, or the service token, replaces or deletes it. */
export function otherKeys(name: string): CodedError {
  return new CodedError(contractError('auth.forbidden', `template ${JSON.stringify(name)} was made with another API key: only it, or the service token, replaces or deletes it`));
}
