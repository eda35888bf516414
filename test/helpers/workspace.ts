import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** Writes a tree of files ({'a/b.txt': 'content'}) under a fresh temp dir and returns its path. */
export function makeWorkspace(files: Record<string, string>, prefix = 'ws-'): string {
  const root = mkdtempSync(join(tmpdir(), prefix));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

/** A workspace root of its own (realpath: the temp dir may be reached through a link). */
export function makeRoot(): string {
  return realpathSync(mkdtempSync(join(tmpdir(), 'roots-')));
}

/** A workspace of flat files in a fresh directory under `root`. */
export function workspaceIn(root: string, files: Record<string, string>): string {
  const dir = mkdtempSync(join(root, 'ws-'));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return dir;
}
