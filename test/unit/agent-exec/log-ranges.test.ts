import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { encodingOf, lastLines, readExcerpt } from '../../../src/agent-exec/log-ranges.js';
import { removeDir, tempDir } from '../../helpers/agent-exec.js';

describe('log ranges', () => {
  const dir = tempDir('agent-exec-ranges-');
  after(() => removeDir(dir));
  // "aé✓b": é is 2 bytes (1-2), ✓ is 3 bytes (3-5).
  const log = join(dir, 'utf8.log');
  writeFileSync(log, 'aé✓b');

  it('a tail window that opens inside a character starts at the next one', async () => {
    const excerpt = await readExcerpt(log, { offset: null, maxBytes: 4, settled: true });
    assert.deepEqual(excerpt.range, [3, 7]);
    assert.equal(excerpt.bytes.toString('utf8'), '✓b');
    assert.equal(excerpt.total, 7);
  });

  it('a page that would end inside a character ends before it, and the next page starts there', async () => {
    const first = await readExcerpt(log, { offset: 0, maxBytes: 4, settled: true });
    assert.deepEqual(first.range, [0, 3]);
    assert.equal(first.bytes.toString('utf8'), 'aé');
    const next = await readExcerpt(log, { offset: first.range[1], maxBytes: 4, settled: true });
    assert.deepEqual(next.range, [3, 7]);
    assert.equal(next.bytes.toString('utf8'), '✓b');
  });

  it('an offset past the end gives an empty range at the end; a missing log is empty', async () => {
    assert.deepEqual((await readExcerpt(log, { offset: 100, maxBytes: 4, settled: true })).range, [7, 7]);
    assert.deepEqual(await readExcerpt(join(dir, 'absent.log'), { offset: null, maxBytes: 4, settled: false }), { bytes: Buffer.alloc(0), range: [0, 0], total: 0 });
  });

  it('an incomplete character at the end waits while the job runs, and is shown (lossy) once it is over', async () => {
    const partial = join(dir, 'partial.log');
    writeFileSync(partial, Buffer.from([0x61, 0xe2, 0x9c]));
    assert.deepEqual((await readExcerpt(partial, { offset: 0, maxBytes: 10, settled: false })).range, [0, 1]);
    const settled = await readExcerpt(partial, { offset: 0, maxBytes: 10, settled: true });
    assert.deepEqual(settled.range, [0, 3]);
    assert.equal(encodingOf(settled.bytes), 'utf-8-lossy');
  });

  it('lastLines keeps the last n lines, a final newline included', () => {
    const text = Buffer.from('one\ntwo\nthree\n');
    assert.equal(lastLines(text, 2).toString(), 'two\nthree\n');
    assert.equal(lastLines(text, 5).toString(), 'one\ntwo\nthree\n');
    assert.equal(lastLines(text, 0).toString(), '');
    assert.equal(lastLines(Buffer.from('no newline'), 1).toString(), 'no newline');
  });
});
