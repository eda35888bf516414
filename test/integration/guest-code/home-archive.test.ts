import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

const ARCHIVER = new URL('../../../src/sandboxes/home-archive.py', import.meta.url).pathname;
const PYTHON = '/usr/bin/python3';

/** A file's user.* extended attributes, read as the sandbox's python reads them. */
function xattrs(path: string): Record<string, string> {
  const program = 'import json, os, sys; print(json.dumps({n: os.getxattr(sys.argv[1], n).decode() for n in os.listxattr(sys.argv[1])}))';
  return JSON.parse(execFileSync(PYTHON, ['-c', program, path], { encoding: 'utf8' })) as Record<string, string>;
}

function setXattr(path: string, name: string, value: string): void {
  execFileSync(PYTHON, ['-c', 'import os, sys; os.setxattr(sys.argv[1], sys.argv[2], sys.argv[3].encode())', path, name, value]);
}

/**
 * home-archive.py, the tar stream a sandbox's home travels in (pause with its files, snapshots,
 * forks), run as it runs in a sandbox (as its user here): what it packs comes back whole.
 */
describe('home-archive.py', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'home-archive-'));
  after(() => rmSync(scratch, { recursive: true, force: true }));

  it("keeps files' user.* extended attributes (E2B's file metadata), a read-only file's too, with modes and links", () => {
    const home = join(scratch, 'home');
    mkdirSync(join(home, 'dir'), { recursive: true });
    writeFileSync(join(home, 'dir', 'tagged.txt'), 'tagged');
    setXattr(join(home, 'dir', 'tagged.txt'), 'user.e2b.author', 'mish');
    writeFileSync(join(home, 'locked.txt'), 'locked');
    setXattr(join(home, 'locked.txt'), 'user.e2b.stage', 'final');
    chmodSync(join(home, 'locked.txt'), 0o444);
    setXattr(join(home, 'dir'), 'user.e2b.kind', 'folder');
    symlinkSync('dir/tagged.txt', join(home, 'link'));
    const stream = execFileSync(PYTHON, ['-I', ARCHIVER, 'pack', home]);
    const back = join(scratch, 'back');
    mkdirSync(back);
    execFileSync(PYTHON, ['-I', ARCHIVER, 'unpack', back], { input: stream });
    assert.equal(readFileSync(join(back, 'dir', 'tagged.txt'), 'utf8'), 'tagged');
    assert.deepEqual(xattrs(join(back, 'dir', 'tagged.txt')), { 'user.e2b.author': 'mish' });
    assert.deepEqual(xattrs(join(back, 'locked.txt')), { 'user.e2b.stage': 'final' });
    assert.equal(statSync(join(back, 'locked.txt')).mode & 0o777, 0o444);
    assert.deepEqual(xattrs(join(back, 'dir')), { 'user.e2b.kind': 'folder' });
    assert.equal(readlinkSync(join(back, 'link')), 'dir/tagged.txt');
  });

  it('leaves out a file system mounted in the home (a volume): it is not the home’s', (t) => {
    if (process.getuid?.() !== 0) return t.skip('mounting a file system needs root');
    const home = join(scratch, 'with-volume');
    mkdirSync(join(home, 'volume'), { recursive: true });
    writeFileSync(join(home, 'own.txt'), 'the home’s');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'volume', join(home, 'volume')]);
    try {
      writeFileSync(join(home, 'volume', 'shared.txt'), 'the volume’s');
      const stream = execFileSync(PYTHON, ['-I', ARCHIVER, 'pack', home]);
      const names = execFileSync('tar', ['-tf', '-'], { input: stream, encoding: 'utf8' }).trim().split('\n');
      assert.deepEqual(names, ['own.txt']);
    } finally {
      execFileSync('umount', [join(home, 'volume')]);
    }
  });
});
