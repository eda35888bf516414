import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { forkWhenQuiet, whileWriting } from '../../../src/sandbox/host/fork-gate.js';

describe('fork gate (ETXTBSY)', () => {
  it('holds a fork back until the staged writes in flight are done', async () => {
    const order: string[] = [];
    let finishWrite!: () => void;
    const writing = whileWriting(() => new Promise<void>((resolve) => (finishWrite = resolve)).then(() => void order.push('write done')));
    const forked = forkWhenQuiet(() => order.push('forked'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(order, []);
    finishWrite();
    await Promise.all([writing, forked]);
    assert.deepEqual(order, ['write done', 'forked']);
  });
});
