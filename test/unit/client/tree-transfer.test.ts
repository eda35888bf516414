import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { pack } from 'tar-stream';
import { unpackTree } from '../../../src/client/tree-transfer.js';

/** A tar stream of these entries, made by hand to hold what a tree on disk would not. */
function archive(entries: Array<{ name: string; type?: 'file' | 'directory' | 'symlink'; linkname?: string; content?: string; mode?: number }>): Readable {
  const stream = pack();
  for (const { content, ...header } of entries) stream.entry({ mode: 0o644, ...header }, content ?? '');
  stream.finalize();
  return stream as unknown as Readable;
}

describe('unpackTree: a tree from somewhere else into a local directory', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'unpack-tree-'));
  after(() => rmSync(scratch, { recursive: true, force: true }));

  it('writes nothing through a link, its own or one already there, and nothing outside the directory', async () => {
    const into = join(scratch, 'a', 'into');
    mkdirSync(into, { recursive: true });
    // A link the archive makes to its own top, then one through it to the parent, then a file through that.
    await assert.rejects(
      unpackTree(
        archive([
          { name: 'a', type: 'symlink', linkname: '.' },
          { name: 'a/b', type: 'symlink', linkname: '..' },
          { name: 'b/pwned', content: 'out' },
        ]),
        into,
      ),
    );
    assert.ok(!existsSync(join(scratch, 'a', 'pwned')), 'nothing was written above the directory');
    // A link left by an earlier pull is not written through either.
    const second = join(scratch, 'second');
    mkdirSync(second);
    symlinkSync(scratch, join(second, 'x'));
    await assert.rejects(unpackTree(archive([{ name: 'x/file', content: 'out' }]), second), /is not a directory/);
    assert.ok(!existsSync(join(scratch, 'file')));
  });

  it('skips absolute names, .. and links out; keeps links within; drops setuid bits', async () => {
    const into = join(scratch, 'plain');
    await unpackTree(
      archive([
        { name: '/abs.txt', content: 'no' },
        { name: '../up.txt', content: 'no' },
        { name: 'out', type: 'symlink', linkname: '/etc/passwd' },
        { name: 'd/up', type: 'symlink', linkname: '../../x' },
        { name: 'd/ok.txt', content: 'yes', mode: 0o4755 },
        { name: 'd/in', type: 'symlink', linkname: '../d/ok.txt' },
      ]),
      into,
    );
    assert.deepEqual(readdirSync(into).sort(), ['d']);
    assert.deepEqual(readdirSync(join(into, 'd')).sort(), ['in', 'ok.txt']);
    assert.ok(lstatSync(join(into, 'd', 'in')).isSymbolicLink());
    assert.equal(statSync(join(into, 'd', 'ok.txt')).mode & 0o7777, 0o755);
  });
});
