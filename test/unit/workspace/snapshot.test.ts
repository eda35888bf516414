import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { snapshotWorkspace, type SnapshotReport } from '../../../src/workspace/snapshot.js';
import { makeWorkspace } from '../../helpers/workspace.js';

const LIMITS = { maxFiles: 10_000, maxBytes: 100 * 1024 * 1024, ownerUid: null };

async function snapshot(source: string, options: { include?: string[]; exclude?: string[] } = {}): Promise<{ dest: string; report: SnapshotReport; files: string[] }> {
  const dest = mkdtempSync(join(tmpdir(), 'snap-'));
  const report = await snapshotWorkspace(source, dest, { ...LIMITS, ...options });
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.push(relative(dest, path));
    }
  };
  walk(dest);
  return { dest, report, files: files.sort() };
}

describe('workspace snapshot', () => {
  it('applies the default exclusions even when include asks for them', async () => {
    const source = makeWorkspace({
      'main.py': 'print(1)',
      '.git/config': 'x',
      '.venv/bin/python': 'x',
      'env2/pyvenv.cfg': 'home = /usr',
      'env2/lib/site.py': 'x',
      'node_modules/pkg/index.js': 'x',
      'target/debug/app': 'x',
      '__pycache__/m.pyc': 'x',
      '.env': 'SECRET=1',
      '.env.local': 'SECRET=2',
      'keys/id_rsa': 'k',
      'keys/id_ed25519.pub': 'k',
      'certs/server.pem': 'k',
      'certs/server.key': 'k',
      'secrets/token': 't',
      'src/app.py': 'x',
    });
    const { files } = await snapshot(source, { include: ['**', '.git/**', '.env', 'node_modules/**', 'secrets/**', '**/*.pem'] });
    assert.deepEqual(files, ['main.py', 'src/app.py']);
  });

  it('honours include and exclude globs', async () => {
    const source = makeWorkspace({ 'a.py': '', 'b.txt': '', 'build/out.o': '', 'build/keep.py': '', 'docs/x.md': '' });
    const { files } = await snapshot(source, { include: ['**/*.py', '**/*.md'], exclude: ['build/**'] });
    assert.deepEqual(files, ['a.py', 'docs/x.md']);
  });

  it('keeps symlinks that stay inside, skips and lists those that leave', async () => {
    const source = makeWorkspace({ 'data/a.txt': 'a' });
    symlinkSync('data/a.txt', join(source, 'inside'));
    symlinkSync(join(source, 'data'), join(source, 'absolute-inside'));
    symlinkSync('/etc/passwd', join(source, 'passwd'));
    symlinkSync('../outside', join(source, 'up'));
    symlinkSync('data/../../x', join(source, 'sneaky'));
    const { dest, report } = await snapshot(source);
    assert.equal(readlinkSync(join(dest, 'inside')), 'data/a.txt');
    assert.equal(readlinkSync(join(dest, 'absolute-inside')), 'data');
    assert.deepEqual(
      report.skipped.map((entry) => entry.path),
      ['passwd', 'sneaky', 'up'],
    );
  });

  it('skips FIFOs and hard links (another name may be a host file)', async () => {
    const source = makeWorkspace({ 'a.txt': 'a' });
    execFileSync('mkfifo', [join(source, 'pipe')]);
    const outside = join(mkdtempSync(join(tmpdir(), 'outside-')), 'host-file');
    writeFileSync(outside, 'host secret');
    linkSync(outside, join(source, 'hardlink'));
    const { files, report } = await snapshot(source);
    assert.deepEqual(files, ['a.txt']);
    assert.deepEqual(
      report.skipped.map((entry) => [entry.path, entry.reason.split(' ')[0]]),
      [
        ['hardlink', 'hard'],
        ['pipe', 'special'],
      ],
    );
  });

  it('hashes the tree: stable for equal trees, different when one file changes', async () => {
    const files = { 'a.txt': 'one', 'dir/b.txt': 'two' };
    const first = (await snapshot(makeWorkspace(files))).report.sha256;
    const second = (await snapshot(makeWorkspace(files))).report.sha256;
    const changed = (await snapshot(makeWorkspace({ ...files, 'dir/b.txt': 'TWO' }))).report.sha256;
    assert.equal(first, second);
    assert.notEqual(first, changed);
  });

  it('refuses a workspace over its file limit', async () => {
    const source = makeWorkspace(Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`f${i}`, 'x'])));
    const dest = mkdtempSync(join(tmpdir(), 'snap-'));
    await assert.rejects(snapshotWorkspace(source, dest, { ...LIMITS, maxFiles: 10 }), /more than 10 files/);
  });

  it('does not follow a symlinked directory', async () => {
    const outside = makeWorkspace({ 'secret.txt': 'host secret' }, 'outside-');
    const source = makeWorkspace({ 'a.txt': 'a' });
    symlinkSync(outside, join(source, 'linked-dir'));
    mkdirSync(join(source, 'real-dir'));
    const { files, report } = await snapshot(source);
    assert.deepEqual(files, ['a.txt']);
    assert.ok(report.skipped.some((entry) => entry.path === 'linked-dir'));
  });
});
