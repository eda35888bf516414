import { posix } from 'node:path';

/** Links followed while resolving one path, as the kernel's limit (past it: ELOOP, nowhere). */
const MAX_LINK_HOPS = 40;

/**
 * How a link of a workspace tree leads out of it: by an absolute target, by its own text
 * (`../x`), or only once the tree's other links are followed (`d/up -> ..` beside
 * `e -> d/up/..`: lexically `d`, resolved the root's parent).
 */
export type LinkEscape = 'absolute' | 'lexical' | 'through-links';

/** The target of the tree's link at a '/'-separated tree path, or undefined when none is there. */
export type LinkLookup = (path: string) => string | undefined;

/**
 * The one judgement of a workspace's links, shared by the host snapshot (which drops and
 * lists a link that leaves) and a sent workspace (which is refused for one): does the link at
 * `path` (normalised, '' being the root) with `target` lead out of the tree, resolved as the
 * kernel resolves it in the sandbox or on the host, through the links `linkAt` finds? Null
 * when it stays inside. Components the tree lacks are taken as written (they lead nowhere).
 */
export function linkEscape(path: string, target: string, linkAt: LinkLookup): LinkEscape | null {
  if (posix.isAbsolute(target)) return 'absolute';
  const lexical = posix.normalize(posix.join(posix.dirname(path), target));
  if (lexical === '..' || lexical.startsWith('../')) return 'lexical';
  return climbsAboveRoot(path, target, linkAt) ? 'through-links' : null;
}

/** The reason given for a link that leaves, the same words on every face. */
export function linkEscapeReason(target: string, escape: LinkEscape): string {
  if (escape === 'absolute') return `a link to the absolute path ${JSON.stringify(target)}, outside the workspace`;
  if (escape === 'lexical') return `a link to ${JSON.stringify(target)}, outside the workspace`;
  return `a link to ${JSON.stringify(target)}, which leaves the workspace through its other links`;
}

/** Resolves the target component by component, replacing each link met by its own target: true when a `..` climbs above the root. */
function climbsAboveRoot(path: string, target: string, linkAt: LinkLookup): boolean {
  const at = path.split('/').slice(0, -1);
  const pending = target.split('/').reverse();
  let hops = 0;
  while (pending.length > 0) {
    const part = pending.pop()!;
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (at.length === 0) return true;
      at.pop();
      continue;
    }
    at.push(part);
    const next = linkAt(at.join('/'));
    if (next === undefined) continue;
    // An absolute link met on the way leaves the tree (the judgement of that link says so too).
    if (posix.isAbsolute(next)) return true;
    hops += 1;
    // The kernel gives up here (ELOOP): the path leads nowhere, so nowhere outside either.
    if (hops > MAX_LINK_HOPS) return false;
    at.pop();
    pending.push(...next.split('/').reverse());
  }
  return false;
}
