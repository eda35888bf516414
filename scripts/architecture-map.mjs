/**
 * docs/architecture.md is the map a newcomer reads src/ by (issue 49): `npm run lint` fails when it
 * no longer matches the code (scripts/check-architecture-map.mjs). Every top-level folder of src/
 * is a row of its layer table, every folder a row names exists, and every source file it names in backticks exists: written from the
 * repository's root (`src/...`, `test/...`, `scripts/...`), or from a folder of src/
 * (`isolation/host/seccomp.ts`, `host/seccomp.ts`: the ending of a file that src/ has).
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root, where this file is; a caller bundled elsewhere (the unit tests) passes its own. */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** What a named source file ends with. */
const SOURCE = /\.(ts|mjs|cjs|js|py|go|c|java|R|sh)$/;
/** Paths written from the repository's root. */
const FROM_ROOT = /^(src|test|scripts|bench|native|proto|deploy|docs)\//;

/** Every file under `base`, as paths relative to it. */
function filesUnder(base, dir = base) {
  const found = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...filesUnder(base, path));
    else found.push(relative(base, path));
  }
  return found;
}

/** The map's problems, one line each (`map:line: what`); none when it matches `root`'s src/. */
export function mapProblems(mapText, root = ROOT) {
  const problems = [];
  const lines = mapText.split('\n');
  const folders = readdirSync(join(root, 'src'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name);
  // The layer table's rows: `| \`a\` \`b\` | what they hold |`.
  const tabled = new Map();
  lines.forEach((line, index) => {
    const row = /^\| ((?:`[a-z-]+` ?)+) \|/.exec(line);
    if (row) for (const [, name] of row[1].matchAll(/`([a-z-]+)`/g)) tabled.set(name, index + 1);
  });
  for (const [name, line] of tabled) if (!folders.includes(name)) problems.push(`${line}: the layer table names src/${name}/, which is gone`);
  for (const name of folders) if (!tabled.has(name)) problems.push(`src/${name}/ is in no row of the layer table`);
  const files = filesUnder(join(root, 'src'));
  lines.forEach((line, index) => {
    for (const [, token] of line.matchAll(/`([^`\s]+)`/g)) {
      if (!SOURCE.test(token) || !token.includes('/') || /[*{}<>$]/.test(token) || token.startsWith('dist/')) continue;
      const exists = FROM_ROOT.test(token) ? existsSync(join(root, token)) : files.some((file) => file === token || file.endsWith(`/${token}`));
      if (!exists) problems.push(`${index + 1}: \`${token}\` names no file of the repository`);
    }
  });
  return problems;
}
