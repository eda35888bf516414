import { makePrivateDirSync } from '../util/private-dir.js';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
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
import type { TemplateStart } from '../contract/templates.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { visibleTo } from '../util/tenant.js';

/** A user name and password a registry takes (basic auth, or for a token from its realm). */
export interface RegistryCredentials {
  username: string;
  password: string;
}

export const TEMPLATE_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

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

  /** Makes (or replaces) template `name` from an image pulled by reference. */
  async fromReference(name: string, reference: string, apiKey?: string): Promise<ImageTemplate> {
    checkName(name);
    return this.save(name, await this.pullImage(parseImageReference(reference)), apiKey);
  }

  /** Pulls an image into the store, with the registries' settings; `credentials` (a build's own) before the configured ones for its registry. */
  pullImage(reference: ImageReference, credentials?: RegistryCredentials): Promise<StoredImage> {
    return this.images.pull(reference, this.registryOptions(credentials && { [reference.registry]: credentials }));
  }

  private registryOptions(credentials: RegistryOptions['credentials'] = {}): RegistryOptions {
    return { credentials: { ...this.settings.registries, ...credentials }, insecureRegistries: this.settings.insecureRegistries, timeoutMs: this.settings.registryTimeoutMs };
  }

  /** Makes (or replaces) template `name` from an image already stored (a build's), with the start command its sandboxes run. */
  fromImage(name: string, image: StoredImage, apiKey?: string, start?: TemplateStart): Promise<ImageTemplate> {
    checkName(name);
    return this.save(name, image, apiKey, start);
  }

  /** Makes (or replaces) template `name` from an uploaded image archive (docker save, or an OCI layout tar). */
  async fromArchive(name: string, archive: Readable, label: string, apiKey?: string): Promise<ImageTemplate> {
    checkName(name);
    return this.save(name, await storeImageArchive(this.images, archive, label, this.settings.maxImageBytes), apiKey);
  }

  /**
   * Template `name` as the cluster has it now: this machine's record, brought up to date from the
   * distribution repository first (made, replaced or deleted elsewhere). A repository that cannot
   * be reached leaves the record as it is here.
   */
  async lookup(name: string): Promise<ImageTemplate | null> {
    if (this.distribution && TEMPLATE_NAME.test(name)) await this.follow(this.distribution, name);
    return this.get(name);
  }

  /** Every template the cluster has (list, after a lookup of each published one). */
  async listAll(): Promise<ImageTemplate[]> {
    const { distribution } = this;
    if (distribution) {
      const names = await distribution.names().catch(() => null);
      if (names !== null) {
        const published = new Set(names.filter((name) => TEMPLATE_NAME.test(name)));
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

  get(name: string): ImageTemplate | null {
    if (!TEMPLATE_NAME.test(name)) return null;
    try {
      return JSON.parse(readFileSync(join(this.templatesDir, `${name}.json`), 'utf8')) as ImageTemplate;
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
    if (template.published && this.distribution) await this.distribution.withdraw(name, template.published);
    rmSync(join(this.templatesDir, `${name}.json`), { force: true });
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

  private async save(name: string, image: StoredImage, apiKey?: string, start?: TemplateStart): Promise<ImageTemplate> {
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
      ...(start && { start }),
      ...(apiKey !== undefined && { api_key: apiKey }),
    };
    // Published before it is recorded: a template of the cluster is one every machine finds.
    if (this.distribution) template = { ...template, published: await this.distribution.publish(template, image) };
    await writeFileAtomic(join(this.templatesDir, `${name}.json`), `${JSON.stringify(template, null, 2)}\n`);
    if (replaced && replaced.image !== image.digest) void this.forgetUnheld(replaced.image).catch(() => undefined);
    return template;
  }

  /** An image no template holds any more goes, with the layers no other image holds. */
  private async forgetUnheld(digest: string): Promise<void> {
    if (!this.list().some((template) => template.image === digest)) await this.images.remove(digest);
  }
}

function checkName(name: string): void {
  if (!TEMPLATE_NAME.test(name))
    throw new CodedError(
      contractError('validation.invalid_request', `template name ${JSON.stringify(name)}: lowercase letters, digits, '.', '_' and '-', at most 64`, { field: 'name' }),
    );
}

/** The registry of a configuration: `templates.dir`, or <stateDir>/templates. */
export function openTemplateRegistry(config: { stateDir: string; templates: TemplateStoreSettings }): TemplateRegistry {
  return new TemplateRegistry(config.templates.dir ?? join(config.stateDir, 'templates'), config.templates);
}

/** A template another API key made: only it, or the service token, replaces or deletes it. */
export function otherKeys(name: string): CodedError {
  return new CodedError(contractError('auth.forbidden', `template ${JSON.stringify(name)} was made with another API key: only it, or the service token, replaces or deletes it`));
}
