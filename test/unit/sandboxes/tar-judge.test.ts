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

  it('refuses what it cannot read as tar reads it: a global pax header, data after a directory, a size not a number, other entry kinds', async () => {
    const header = (name: string, flag: string, size: number, magic = 'ustar\0' + '00') => {
      const block = Buffer.alloc(512);
      block.write(name, 0);
      block.write('0000644\0', 100);
      block.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
      block.write('00000000000\0', 136);
      block.write(flag, 156);
      block.write(magic, 257, 'latin1');
      block.write('        ', 148);
      let sum = 0;
      for (const byte of block) sum += byte;
      block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
      return block;
    };
    const ending = Buffer.alloc(1024);
    const take = () => 'take' as const;
    await assert.rejects(judged(Buffer.concat([header('g', 'g', 0), ending]), take), /global pax header/);
    await assert.rejects(judged(Buffer.concat([header('dir/', '5', 512), Buffer.alloc(512), ending]), take), /only a file carries data/);
    await assert.rejects(judged(Buffer.concat([header('sparse', 'S', 0), ending]), take), /entry of type "S"/);
    const pax = Buffer.alloc(512);
    pax.write('17 size=0x200000\n');
    await assert.rejects(judged(Buffer.concat([header('pax', 'x', 17), pax, header('f', '0', 0), ending]), take), /not a decimal number/);
    // Old GNU's magic keeps times where ustar has its prefix: no prefix is read there.
    const gnu = header('secret', '0', 0, 'ustar  \0');
    gnu.write('pub', 345);
    let sum = 0;
    gnu.write('        ', 148);
    for (const byte of gnu) sum += byte;
    gnu.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
    const { seen } = await judged(Buffer.concat([gnu, ending]), take);
    assert.deepEqual(
      seen.map((entry) => entry.name),
      ['secret'],
    );
  });
});
