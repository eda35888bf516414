/** A template's name: what a create names, E2B's template ID. */
export const TEMPLATE_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
/** A tag of a template (E2B's `name:tag`): a name and a tag fit one registry tag (template-distribution.ts). */
export const TEMPLATE_TAG = /^[a-z0-9][a-z0-9._-]{0,59}$/;
/** The tag a name alone stands for, as in E2B. */
export const DEFAULT_TAG = 'default';

/**
 * A template reference, `name` or `name:tag`, as the key its record is kept under: `name` for the
 * default tag, `name:tag` for any other; null when the text is not one.
 */
export function templateKey(text: string): string | null {
  const colon = text.indexOf(':');
  const name = colon < 0 ? text : text.slice(0, colon);
  const tag = colon < 0 ? DEFAULT_TAG : text.slice(colon + 1);
  if (!TEMPLATE_NAME.test(name) || !TEMPLATE_TAG.test(tag)) return null;
  return tag === DEFAULT_TAG ? name : `${name}:${tag}`;
}

/** A key's name and tag. */
export function keyParts(key: string): { name: string; tag: string } {
  const colon = key.indexOf(':');
  return colon < 0 ? { name: key, tag: DEFAULT_TAG } : { name: key.slice(0, colon), tag: key.slice(colon + 1) };
}
