import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { mapProblems } from '../../../scripts/architecture-map.mjs';

/** A repository of two rooms, `jobs/` and `isolation/host/`, each with a file. */
function repository(): string {
  const root = mkdtempSync(join(tmpdir(), 'map-'));
  for (const file of ['src/jobs/front-door.ts', 'src/isolation/host/seccomp.ts', 'scripts/build.sh']) {
    mkdirSync(join(root, file, '..'), { recursive: true });
    writeFileSync(join(root, file), '');
  }
  return root;
}

/**
 * The check `npm run lint` runs on docs/architecture.md (scripts/check-architecture-map.mjs, scripts/architecture-map.mjs): the
 * map fails as soon as a room it names is gone, a room is missing from it, or a file it names is
 * not there.
 */
describe('the architecture map check', () => {
  it('passes the project’s own map', () => {
    // The root as this file finds it: the script's own import.meta.url is the unit set's bundle's (scripts/build-tests.mjs).
    const root = fileURLToPath(new URL('../../..', import.meta.url));
    assert.deepEqual(mapProblems(readFileSync(join(root, 'docs', 'architecture.md'), 'utf8'), root), []);
  });

  it('passes a map that names every room and only files that exist, from the root or from a room', () => {
    const map =
      '| `jobs` | the front door |\n| `isolation` | seccomp |\n\n`src/jobs/front-door.ts`, `host/seccomp.ts`, `isolation/host/seccomp.ts`, `scripts/build.sh`, `dist/x.js`, `/home/user`';
    assert.deepEqual(mapProblems(map, repository()), []);
  });

  it('names a room that is gone, a room the table lacks, and a file that is not there, each with its line', () => {
    const map = '| `jobs` `service` | the front door |\n\n`host/nope.ts` and `src/jobs/gone.ts`';
    assert.deepEqual(mapProblems(map, repository()), [
      '1: the layer table names src/service/, which is gone',
      'src/isolation/ is in no row of the layer table',
      '3: `host/nope.ts` names no file of the repository',
      '3: `src/jobs/gone.ts` names no file of the repository',
    ]);
  });
});
