import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WarmPool } from '../../../src/isolation/bubblewrap/warm-pool.js';

const item = (discarded: string[], name: string) => ({ discard: () => discarded.push(name) });

describe('warm pool', () => {
  it('keeps a key whose sandboxes were all taken, and no longer one it evicted for a newer key', () => {
    const discarded: string[] = [];
    const pool = new WarmPool<{ discard(): void }>(1, 2);
    pool.add('a', item(discarded, 'a1'));
    pool.add('b', item(discarded, 'b1'));
    assert.ok(pool.take('a'));
    assert.ok(pool.keeps('a'), 'taken empty, still one of the warm keys');
    pool.add('c', item(discarded, 'c1'));
    assert.deepEqual(discarded, ['b1'], 'the least recently used key goes');
    assert.equal(pool.keeps('b'), false);
    assert.ok(pool.keeps('a') && pool.keeps('c'));
  });
});
