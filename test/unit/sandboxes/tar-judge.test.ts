import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { TarFormatError, TarJudge, type TarEntry, type TarVerdict } from '../../../src/sandboxes/tar-judge.js';

/** Runs `archive` through a judge in chunks of `chunk` bytes; what it passed on and what it saw. */
async function judged(archive: Buffer, verdict: (entry: TarEntry) => TarVerdict, chunk = 1000) {
  const out: Buffer[] = [];
  const seen: TarEntry[] = [];
  const taken: string[] = [];
  const judge = new TarJudge(
    (entry) => {
      seen.push(entry);
      return verdict(entry);
    },
    (bytes) => void out.push(Buffer.from(bytes)),
    (entry) => void taken.push(entry.name),
  );
  for (let offset = 0; offset < archive.length && !judge.done; offset += chunk) await judge.push(archive.subarray(offset, offset + chunk));
  if (!judge.done) await judge.end();
  return { out: Buffer.concat(out), seen, taken };
}

/** The names GNU tar lists in an archive. */
function listed(archive: Buffer): string[] {
  return execFileSync('tar', ['-tf', '-'], { input: archive }).toString().trim().split('\n').filter(Boolean);
}

describe('the tar judge', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tar-judge-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const tree = join(dir, 'tree');
  const longName = `${'deep-directory-name/'.repeat(8)}a-file-whose-path-is-over-a-hundred-bytes.txt`;
  mkdirSync(join(tree, longName, '..'), { recursive: true });
  writeFileSync(join(tree, longName), 'long');
  writeFileSync(join(tree, 'keep.txt'), 'k'.repeat(3000));
  writeFileSync(join(tree, 'drop.bin'), 'd'.repeat(5000));
  symlinkSync(`../${'x'.repeat(120)}`, join(tree, 'long-link'));

  for (const format of ['gnu', 'pax'] as const) {
    it(`reads ${format} archives (long names and links in their extended headers) and cuts a dropped entry out whole`, async () => {
      const archive = execFileSync('tar', ['-c', `--format=${format}`, '-f', '-', '-C', tree, '.']);
      const { out, seen, taken } = await judged(archive, (entry) => (entry.name.endsWith('drop.bin') ? 'drop' : 'take'), 777);
      assert.ok(
        seen.some((entry) => entry.name === `./${longName}` && entry.type === 'file' && entry.size === 4),
        'the long name comes from its extended header',
      );
      assert.ok(
        seen.some((entry) => entry.type === 'symlink' && entry.linkname === `../${'x'.repeat(120)}`),
        'and the long link target',
      );
      assert.ok(!taken.includes('./drop.bin'));
      const names = listed(out);
      assert.ok(names.includes('./keep.txt') && names.includes(`./${longName}`) && !names.includes('./drop.bin'), names.join(', '));
      // What was passed on is the archive as it came, less the dropped entry: tar unpacks it whole.
      const into = join(dir, `out-${format}`);
      mkdirSync(into);
      execFileSync('tar', ['-x', '-f', '-', '-C', into], { input: out });
      assert.equal(execFileSync('cat', [join(into, 'keep.txt')]).toString(), 'k'.repeat(3000));
    });
  }

  it('stops before an entry: what came before is a whole archive; an archive cut inside an entry, or not tar at all, is refused', async () => {
    const archive = execFileSync('tar', ['-c', '-f', '-', '-C', tree, 'keep.txt', 'drop.bin']);
    const { out, taken } = await judged(archive, (entry) => (entry.name === 'drop.bin' ? 'stop' : 'take'));
    assert.deepEqual(taken, ['keep.txt']);
    assert.deepEqual(listed(out), ['keep.txt']);
    await assert.rejects(
      judged(archive.subarray(0, 1024 + 512), () => 'take'),
      TarFormatError,
    );
    await assert.rejects(
      judged(Buffer.alloc(2048, 7), () => 'take'),
      TarFormatError,
    );
  });
});
