import { makePrivateDirSync } from '../util/private-dir.js';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { TemplateStoreSettings } from '../config/schema.js';
import { CodedError, contractError } from '../contract/errors.js';
import { storeImageArchive } from '../images/image-archive.js';
import { parseImageReference, type ImageReference } from '../images/image-reference.js';
import { ImageStore, type StoredImage } from '../images/image-store.js';
import type { ImageRunConfig } from '../images/image-manifest.js';
import type { TemplateStart } from '../contract/templates.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { visibleTo } from '../util/tenant.js';

/** A user name and password a registry takes (basic auth, or for a token from its realm). */
export interface RegistryCredentials {
  username: string;
  password: string;
}

/** A template made of an image: the name sandboxes are created from, and the image under it. */
export interface ImageTemplate {
  name: string;
  /** The image's digest in the store (its manifest's, or an archive's config's). */
  image: string;
  /** The reference it was pulled by, or `archive:` and the upload's label. */
  source: string;
  /** What its sandboxes start with: the image's environment, working dir, user, command. */
  config: ImageRunConfig;
  bytes: number;
  created_at: string;
  /** The API key that made it (service.apiKeys); absent: the service token. Only it replaces or deletes it. */
  api_key?: string;
  /** What each of its sandboxes starts with, and waits for (an E2B build's start and ready commands). */
  start?: TemplateStart;
}

export const TEMPLATE_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/**
 * The templates made of images on this machine, and the image store under them:
 *   <dir>/images/...            the store (images/image-store.ts)
 *   <dir>/templates/<name>.json one ImageTemplate, written whole (atomic rename)
 * Every process of a service (its front door, its sandbox host) opens the same directory: a
 * template made by one is read by the others from the disk at each lookup.
 */
export class TemplateRegistry {
  readonly images: ImageStore;
  private readonly templatesDir: string;

  constructor(
    readonly dir: string,
    private readonly settings: TemplateStoreSettings,
  ) {
    makePrivateDirSync(dir);
    this.images = new ImageStore(join(dir, 'images'), { maxImageBytes: settings.maxImageBytes, maxEntries: settings.maxImageEntries });
    this.templatesDir = join(dir, 'templates');
    mkdirSync(this.templatesDir, { recursive: true, mode: 0o700 });
  }

  /** Makes (or replaces) template `name` from an image pulled by reference. */
  async fromReference(name: string, reference: string, apiKey?: string): Promise<ImageTemplate> {
    checkName(name);
    return this.save(name, await this.pullImage(parseImageReference(reference)), apiKey);
  }

  /** Pulls an image into the store, with the registries' settings; `credentials` (a build's own) before the configured ones for its registry. */
  pullImage(reference: ImageReference, credentials?: RegistryCredentials): Promise<StoredImage> {
    return this.images.pull(reference, {
      credentials: credentials ? { ...this.settings.registries, [reference.registry]: credentials } : this.settings.registries,
      insecureRegistries: this.settings.insecureRegistries,
      timeoutMs: this.settings.registryTimeoutMs,
    });
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
  delete(name: string): { layersGone: Promise<void> } | false {
    const template = this.get(name);
    if (!template) return false;
    rmSync(join(this.templatesDir, `${name}.json`), { force: true });
    return { layersGone: this.forgetUnheld(template.image) };
  }

  /** The host directories of a template's layers, bottom first; template.not_found when its image is gone. */
  layerTrees(template: ImageTemplate): string[] {
    const image = this.images.image(template.image);
    if (!image)
      throw new CodedError(
        contractError('template.not_found', `template ${JSON.stringify(template.name)}'s image ${template.image} is no longer stored`, { template: template.name }),
      );
    return this.images.layerTrees(image);
  }

  private async save(name: string, image: StoredImage, apiKey?: string, start?: TemplateStart): Promise<ImageTemplate> {
    const replaced = this.get(name);
    // Checked again here, after a pull or an upload that took its time: another key's template
    // made meanwhile under the name is not taken over.
    if (replaced && !visibleTo(apiKey, replaced.api_key)) throw otherKeys(name);
    const template: ImageTemplate = {
      name,
      image: image.digest,
      source: image.source,
      config: image.config,
      bytes: image.bytes,
      created_at: new Date().toISOString(),
      ...(start && { start }),
      ...(apiKey !== undefined && { api_key: apiKey }),
    };
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
