import type { ImageRunConfig } from '../images/image-manifest.js';
import type { TemplateStart } from '../contract/templates.js';

/** A template made of an image: the name sandboxes are created from, and the image under it. */
export interface ImageTemplate {
  /** Its key: `name` (the default tag) or `name:tag` (template-reference.ts). */
  name: string;
  /** The image's digest in the store (its manifest's, or an archive's config's). */
  image: string;
  /** The reference it was pulled by, or `archive:` and the upload's label. */
  source: string;
  /** What its sandboxes start with: the image's environment, working dir, user, command. */
  config: ImageRunConfig;
  bytes: number;
  created_at: string;
  /** The build that made its image (E2B's build ID; a create, a pull or an upload is one too): its tags name it. */
  build_id?: string;
  /** The API key that made it (service.apiKeys); absent: the service token. Only it replaces or deletes it. */
  api_key?: string;
  /** What each of its sandboxes starts with, and waits for (an E2B build's start and ready commands). */
  start?: TemplateStart;
  /** Its image's digest in the cluster's distribution repository (template-distribution.ts). */
  published?: string;
}
