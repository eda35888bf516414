#!/usr/bin/env node
// Copies the programs that run inside sandboxes (src/**/*.py, *.cjs, *.java, *.R: task harnesses,
// code-interpreter kernels, waiting interpreters) into dist/ beside the modules tsc compiled from the
// same folder, which read them relative to their own URL (src/util/guest-program.ts); tsc
// copies no file that is not TypeScript. The CLI bundles' modules keep their dist/ URLs
// (scripts/bundle-cli.mjs), so they find the same copies. `npm run build` runs it after tsc.
// Usage: node scripts/copy-guest-programs.mjs
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SRC = join(ROOT, 'src');
const DIST = join(ROOT, 'dist');

for (const entry of readdirSync(SRC, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !/\.(py|cjs|java|R)$/.test(entry.name)) continue;
  const from = join(entry.parentPath, entry.name);
  const to = join(DIST, relative(SRC, from));
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(from, to);
}
