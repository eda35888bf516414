import { CodedError, contractError } from '../contract/errors.js';

/** An image named as `docker pull` names it: registry, repository, and a tag or a digest. */
export interface ImageReference {
  /** host[:port], as dialled; Docker Hub is `registry-1.docker.io`. */
  registry: string;
  /** The repository path on that registry (`library/alpine` for Docker Hub's `alpine`). */
  repository: string;
  /** A tag (`latest` when neither is given) or a digest (`sha256:...`), which wins when both are. */
  tag: string | null;
  digest: string | null;
}

const DOCKER_HUB = 'registry-1.docker.io';
const COMPONENT = /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$/;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
export const DIGEST = /^sha256:[a-f0-9]{64}$/;

/**
 * Parses a reference by the distribution project's grammar: the first component is a registry
 * when it has a dot or a port or is `localhost`; otherwise the image is Docker Hub's, and a
 * one-component name is under `library/`.
 */
export function parseImageReference(text: string): ImageReference {
  const invalid = (why: string) => new CodedError(contractError('image.invalid_reference', `image reference "${text}": ${why}`));
  if (text.length === 0 || text.length > 512) throw invalid('must be 1 to 512 characters');
  let rest = text;
  let digest: string | null = null;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) throw invalid('a digest is sha256: and 64 lowercase hex digits');
  }
  let tag: string | null = null;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) throw invalid(`"${tag}" is not a tag`);
  }
  const parts = rest.split('/');
  let registry = DOCKER_HUB;
  if (parts.length > 1 && (/[.:]/.test(parts[0]!) || parts[0] === 'localhost')) {
    registry = parts.shift()!;
    if (!/^[A-Za-z0-9.-]+(?::\d{1,5})?$/.test(registry)) throw invalid(`"${registry}" is not a registry host`);
  }
  if (parts.some((part) => !COMPONENT.test(part))) throw invalid('a repository is lowercase letters, digits and separators (. _ __ -) between slashes');
  if (registry === DOCKER_HUB && parts.length === 1) parts.unshift('library');
  return { registry, repository: parts.join('/'), tag: digest === null && tag === null ? 'latest' : tag, digest };
}

/** The reference written back in full, the way a registry's clients print it. */
export function formatImageReference(reference: ImageReference): string {
  const name = `${reference.registry}/${reference.repository}`;
  return reference.digest ? `${name}@${reference.digest}` : `${name}:${reference.tag}`;
}
