/**
 * Sandbox backends by kind. A request names a kind (or an alias users know it by); the
 * registry resolves it to a canonical kind, so results and replay hashes never depend on
 * which spelling the caller used.
 */
export const BACKEND_KINDS = ['local_process', 'gvisor', 'microvm'] as const;
export type BackendKind = (typeof BACKEND_KINDS)[number];

/** `bubblewrap` is what local_process is; `firecracker` is the spec's name for the microVM. */
export const BACKEND_ALIASES: Readonly<Record<string, BackendKind>> = { bubblewrap: 'local_process', firecracker: 'microvm' };

export function canonicalKind(kind: string): BackendKind | null {
  if ((BACKEND_KINDS as readonly string[]).includes(kind)) return kind as BackendKind;
  return BACKEND_ALIASES[kind] ?? null;
}

/** Every name a request may use, each kind followed by its aliases. */
export const BACKEND_KIND_NAMES: readonly string[] = BACKEND_KINDS.flatMap((kind) => [kind, ...Object.keys(BACKEND_ALIASES).filter((alias) => BACKEND_ALIASES[alias] === kind)]);
