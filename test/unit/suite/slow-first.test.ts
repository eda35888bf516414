import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

const integration = join(import.meta.dirname, '..', '..', 'integration');

describe("the integration set's start order (test/integration/slow-first.txt)", () => {
  it('names only test files that exist, each once', () => {
    const names = readFileSync(join(integration, 'slow-first.txt'), 'utf8')
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'));
    assert.ok(names.length > 0);
    assert.deepEqual(
      names.filter((name) => !name.endsWith('.test.ts') || !existsSync(join(integration, name))),
      [],
      'a renamed or removed file left in the list',
    );
    assert.equal(new Set(names).size, names.length);
  });
});
