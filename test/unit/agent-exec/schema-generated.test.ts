import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

const git = (args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' });

/**
 * schemas/ is generated from the TypeBox contract (the generator reads dist/, which npm test
 * builds first). The copy git holds is compared, not only the one on disk: the build before
 * the tests rewrites the file on disk, so only the checked-in copy can still be stale there.
 */
describe('generated schemas', () => {
  const out = mkdtempSync(join(tmpdir(), 'generated-schemas-'));
  after(() => rmSync(out, { recursive: true, force: true }));
  execFileSync(process.execPath, [join(ROOT, 'scripts/generate-schemas.mjs'), out]);
  const generated = readdirSync(join(out, 'schemas')).sort();
  const stale = (name: string) => `schemas/${name} is not what scripts/generate-schemas.mjs writes: run npm run build and commit schemas/`;

  it('schemas/ in git holds exactly the generated files, each as generated', () => {
    const checkedIn = git(['ls-files', '--', 'schemas'])
      .split('\n')
      .filter(Boolean)
      .map((path) => path.slice('schemas/'.length))
      .sort();
    assert.deepEqual(checkedIn, generated);
    for (const name of generated) assert.ok(git(['show', `:schemas/${name}`]) === readFileSync(join(out, 'schemas', name), 'utf8'), stale(name));
  });

  it('schemas/ on disk, what npm pack ships, is as generated', () => {
    for (const name of generated) assert.ok(readFileSync(join(ROOT, 'schemas', name), 'utf8') === readFileSync(join(out, 'schemas', name), 'utf8'), stale(name));
  });
});
