import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { JobStatusSchema } from '../../../src/contract/run-job.js';

const page = readFileSync(new URL('../../../ui/index.html', import.meta.url), 'utf8');

/** The page is plain HTML, not built from the contract: these keep the two from drifting apart. */
describe('dashboard page', () => {
  it('offers every job status of the contract in its status filter, and no other', () => {
    const filter = /<select id="status-filter">([\s\S]*?)<\/select>/.exec(page)?.[1] ?? '';
    const offered = [...filter.matchAll(/<option value="([^"]*)"/g)].map((match) => match[1]);
    assert.equal(offered[0], '', 'any status first');
    assert.deepEqual(offered.slice(1).sort(), JobStatusSchema.anyOf.map((literal) => String(literal.const)).sort());
  });

  it('holds no inline script, handler or style, which its Content-Security-Policy would refuse', () => {
    for (const script of page.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)) {
      assert.match(script[1]!, /\bsrc="[^"]+"/);
      assert.equal(script[2]!.trim(), '');
    }
    assert.doesNotMatch(page, /\son[a-z]+=/i);
    assert.doesNotMatch(page, /<style\b|\sstyle=/i);
  });
});
