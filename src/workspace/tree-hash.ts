import { createHash } from 'node:crypto';

/**
 * The Merkle-style workspace hash: one line per entry (kind, permission class, path, content
 * digest or link target), sorted by path, hashed together. Only the executable bit of a mode
 * counts, so two checkouts under different umasks hash alike.
 */
export type TreeEntry = { kind: 'file'; path: string; executable: boolean; sha256: string } | { kind: 'dir'; path: string } | { kind: 'symlink'; path: string; target: string };

export function treeHash(entries: readonly TreeEntry[]): string {
  const lines = entries.map((entry) => {
    if (entry.kind === 'file') return `file ${entry.executable ? 'x' : '-'} ${entry.path}\0${entry.sha256}`;
    if (entry.kind === 'symlink') return `link - ${entry.path}\0${entry.target}`;
    return `dir - ${entry.path}\0`;
  });
  lines.sort();
  const hash = createHash('sha256');
  for (const line of lines) hash.update(`${line}\n`);
  return hash.digest('hex');
}
