import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { withinDeadline } from '../../../src/util/deadline.js';

describe('withinDeadline', () => {
  it('gives the work, or the late error once its time passed first, whose later failure is not unhandled', async () => {
    assert.equal(await withinDeadline(Promise.resolve(42), 1000, () => new Error('late')), 42);
    let fail!: (error: Error) => void;
    const slow = new Promise<never>((_, reject) => (fail = reject));
    await assert.rejects(
      withinDeadline(slow, 5, () => new Error('it took too long')),
      /took too long/,
    );
    fail(new Error('failed after its deadline'));
    await new Promise((resolve) => setImmediate(resolve));
  });
});
