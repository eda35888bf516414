import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { SentWorkspace } from '../../../src/contract/run-job.js';
import { readSentWorkspace, SentWorkspaceError, type SentWorkspaceCaps } from '../../../src/workspace/sent-workspace.js';
import { snapshotWorkspace } from '../../../src/workspace/snapshot.js';
import { gzipBomb, makeTar, makeTarGz, type ArchiveEntry } from '../../helpers/archives.js';
import { makeWorkspace } from '../../helpers/workspace.js';

const CAPS: SentWorkspaceCaps = { maxEntries: 1000, maxBytes: 1024 * 1024, maxFileBytes: 512 * 1024 };
const SNAPSHOT_LIMITS = { maxFiles: 10_000, maxBytes: 100 * 1024 * 1024, ownerUid: null };

const inline = (files: Array<{ path: string; content: string; encoding?: 'utf8' | 'base64'; mode?: number }>): SentWorkspace => ({ source: 'inline', files });
const archive = async (entries: ArchiveEntry[], format: 'tar' | 'tar.gz' = 'tar'): Promise<SentWorkspace> => ({
  source: 'archive',
  format,
  data: (format === 'tar' ? await makeTar(entries) : await makeTarGz(entries)).toString('base64'),
});

/** Written out, then snapshotted as the runner does: the tree and its workspace_sha256. */
async function materialise(workspace: SentWorkspace, caps = CAPS) {
  const dir = mkdtempSync(join(tmpdir(), 'sent-'));
  const report = await readSentWorkspace(workspace, caps, dir);
  const copy = mkdtempSync(join(tmpdir(), 'sent-copy-'));
  const snapshot = await snapshotWorkspace(dir, copy, SNAPSHOT_LIMITS);
  return { dir, report, snapshot };
}

async function hostSnapshot(source: string) {
  return snapshotWorkspace(source, mkdtempSync(join(tmpdir(), 'host-copy-')), SNAPSHOT_LIMITS);
}

/** Refused both when only checked and when written out, with this code (and cap, for a limit). */
async function assertRefused(workspace: SentWorkspace, code: string, pattern: RegExp, caps = CAPS): Promise<Record<string, unknown>> {
  let details: Record<string, unknown> = {};
  for (const destination of [null, mkdtempSync(join(tmpdir(), 'sent-refused-'))]) {
    await assert.rejects(readSentWorkspace(workspace, caps, destination), (error: unknown) => {
      assert.ok(error instanceof SentWorkspaceError, String(error));
      assert.equal(error.error.code, code, error.message);
      assert.match(error.message, pattern);
      details = error.error.details ?? {};
      return true;
    });
  }
  return details;
}

describe('sent workspaces: what is written', () => {
  it('writes inline files (utf8, base64, an executable mode) and reports entries and bytes', async () => {
    const { dir, report } = await materialise(
      inline([
        { path: 'src/main.py', content: 'print("hé")\n' },
        { path: 'bin/data.bin', content: Buffer.from([0, 1, 2, 255]).toString('base64'), encoding: 'base64' },
        { path: 'run.sh', content: '#!/bin/sh\necho ok\n', mode: 0o755 },
      ]),
    );
    assert.equal(readFileSync(join(dir, 'src/main.py'), 'utf8'), 'print("hé")\n');
    assert.deepEqual([...readFileSync(join(dir, 'bin/data.bin'))], [0, 1, 2, 255]);
    assert.notEqual(statSync(join(dir, 'run.sh')).mode & 0o100, 0);
    assert.equal(statSync(join(dir, 'src/main.py')).mode & 0o111, 0);
    // Three files and the two directories their paths imply.
    assert.deepEqual(report, { entries: 5, bytes: Buffer.byteLength('print("hé")\n') + 4 + 18 });
  });

  it('writes archive entries: ./ prefixes dropped, directories (empty ones too), links inside kept', async () => {
    const entries: ArchiveEntry[] = [
      { name: './', type: 'directory' },
      { name: './sub/', type: 'directory' },
      { name: './sub/a.txt', content: 'a' },
      { name: './empty/', type: 'directory' },
      { name: './tool', content: '#!/bin/sh\n', mode: 0o755 },
      { name: './sub/link', type: 'symlink', linkname: 'a.txt' },
      { name: './up', type: 'symlink', linkname: 'sub/../tool' },
    ];
    for (const format of ['tar', 'tar.gz'] as const) {
      const { dir, report } = await materialise(await archive(entries, format));
      assert.deepEqual(readdirSync(dir).sort(), ['empty', 'sub', 'tool', 'up']);
      assert.equal(readlinkSync(join(dir, 'sub/link')), 'a.txt');
      assert.equal(readlinkSync(join(dir, 'up')), 'sub/../tool');
      assert.notEqual(statSync(join(dir, 'tool')).mode & 0o100, 0);
      assert.deepEqual(report, { entries: 6, bytes: 11 });
    }
  });

  it('only checks when given no destination, with the same report', async () => {
    const workspace = await archive([{ name: 'a/b.txt', content: 'xyz' }]);
    assert.deepEqual(await readSentWorkspace(workspace, CAPS, null), { entries: 2, bytes: 3 });
  });

  it('gives the same workspace_sha256 inline, as tar, as tar.gz and snapshotted from a host directory', async () => {
    const files = { 'main.py': 'print(1)\n', 'pkg/mod.py': 'X = 2\n', 'pkg/deep/data.txt': 'data', 'run.sh': '#!/bin/sh\n', '.env': 'SECRET=1', 'node_modules/m/i.js': '' };
    const host = makeWorkspace(files);
    chmodSync(join(host, 'run.sh'), 0o755);
    const expected = (await hostSnapshot(host)).sha256;
    const entries = Object.entries(files).map(([name, content]) => ({ name, content, mode: name === 'run.sh' ? 0o755 : 0o644 }));
    const sent = [
      inline(Object.entries(files).map(([path, content]) => ({ path, content, ...(path === 'run.sh' ? { mode: 0o755 } : {}) }))),
      await archive(entries, 'tar'),
      await archive(entries, 'tar.gz'),
    ];
    for (const workspace of sent) {
      const { snapshot } = await materialise(workspace);
      assert.equal(snapshot.sha256, expected, workspace.source);
      // The default exclusions hold: .env and node_modules were sent, and left out.
      assert.equal(snapshot.files, 4);
    }
  });

  it('gives the same hash for links and empty directories as the host snapshot', async () => {
    const host = makeWorkspace({ 'sub/a.txt': 'a' });
    mkdirSync(join(host, 'empty'));
    symlinkSync('sub/a.txt', join(host, 'link'));
    const { snapshot } = await materialise(
      await archive([
        { name: 'sub/a.txt', content: 'a' },
        { name: 'empty', type: 'directory' },
        { name: 'link', type: 'symlink', linkname: 'sub/a.txt' },
      ]),
    );
    assert.equal(snapshot.sha256, (await hostSnapshot(host)).sha256);
  });

  it('keeps a loop of links (it leads nowhere, so nowhere outside)', async () => {
    const { dir } = await materialise(
      await archive([
        { name: 'a', type: 'symlink', linkname: 'b' },
        { name: 'b', type: 'symlink', linkname: 'a' },
      ]),
    );
    assert.equal(readlinkSync(join(dir, 'a')), 'b');
  });
});

describe('sent workspaces: refusals', () => {
  it('refuses absolute paths and .. segments (validation.path_escape)', async () => {
    await assertRefused(inline([{ path: '/etc/passwd', content: 'x' }]), 'validation.path_escape', /workspace\.files\.0\.path "\/etc\/passwd" is an absolute path/);
    const details = await assertRefused(
      inline([
        { path: 'ok.txt', content: '' },
        { path: 'a/../../x', content: 'x' },
      ]),
      'validation.path_escape',
      /has a \.\. segment/,
    );
    assert.deepEqual(details, { field: 'workspace.files.1.path', path: 'a/../../x' });
    await assertRefused(await archive([{ name: '/abs.txt', content: 'x' }]), 'validation.path_escape', /archive entry "\/abs.txt" is an absolute path/);
    await assertRefused(await archive([{ name: '../evil', content: 'x' }]), 'validation.path_escape', /has a \.\. segment/);
    await assertRefused(await archive([{ name: 'a/./../../evil', content: 'x' }], 'tar.gz'), 'validation.path_escape', /has a \.\. segment/);
  });

  it("refuses links whose target leaves the tree: absolute, by .., or through the tree's own links", async () => {
    await assertRefused(await archive([{ name: 'l', type: 'symlink', linkname: '/etc/passwd' }]), 'validation.path_escape', /link to the absolute path "\/etc\/passwd"/);
    await assertRefused(await archive([{ name: 'sub/l', type: 'symlink', linkname: '../../x' }]), 'validation.path_escape', /link to "\.\.\/\.\.\/x", outside/);
    // Lexically sub/out -> sub/up/.. is sub; resolved, up is the root, and its .. is outside.
    await assertRefused(
      await archive([
        { name: 'sub/up', type: 'symlink', linkname: '..' },
        { name: 'sub/out', type: 'symlink', linkname: 'up/../etc' },
      ]),
      'validation.path_escape',
      /"sub\/out" is a link to "up\/\.\.\/etc", which leaves the workspace through its other links/,
    );
  });

  it('refuses an entry under a link, whichever comes first', async () => {
    await assertRefused(
      await archive([
        { name: 'l', type: 'symlink', linkname: 'sub' },
        { name: 'l/x', content: 'x' },
      ]),
      'validation.path_escape',
      /"l\/x" lies under the link "l"/,
    );
    await assertRefused(
      await archive([
        { name: 'l/x', content: 'x' },
        { name: 'l', type: 'symlink', linkname: 'sub' },
      ]),
      'validation.invalid_request',
      /"l" comes twice in the workspace \(as a dir, then as a symlink\)/,
    );
  });

  it('refuses hard links, devices, FIFOs (validation.path_escape)', async () => {
    await assertRefused(
      await archive([
        { name: 'a', content: 'a' },
        { name: 'b', type: 'link', linkname: 'a' },
      ]),
      'validation.path_escape',
      /archive entry "b" is a hard link \(to "a"\)/,
    );
    await assertRefused(await archive([{ name: 'tty', type: 'character-device' }]), 'validation.path_escape', /"tty" is a character-device entry/);
    await assertRefused(await archive([{ name: 'disk', type: 'block-device' }]), 'validation.path_escape', /"disk" is a block-device entry/);
    await assertRefused(await archive([{ name: 'pipe', type: 'fifo' }], 'tar.gz'), 'validation.path_escape', /"pipe" is a fifo entry/);
  });

  it('refuses duplicates and entries under a file (validation.invalid_request)', async () => {
    await assertRefused(
      inline([
        { path: 'a', content: '1' },
        { path: './a', content: '2' },
      ]),
      'validation.invalid_request',
      /"\.\/a" comes twice/,
    );
    await assertRefused(
      inline([
        { path: 'a', content: '1' },
        { path: 'a/b', content: '2' },
      ]),
      'validation.invalid_request',
      /"a\/b" lies under the file "a"/,
    );
    await assertRefused(inline([{ path: '.', content: '1' }]), 'validation.invalid_request', /names the workspace root/);
  });

  it('refuses content that is not base64, and archives that are not what they claim', async () => {
    await assertRefused(inline([{ path: 'a', content: 'not base64!', encoding: 'base64' }]), 'validation.invalid_request', /workspace\.files\.0\.content is not base64/);
    await assertRefused({ source: 'archive', format: 'tar', data: '@@@@' }, 'validation.invalid_request', /workspace\.data is not base64/);
    const tar = await makeTar([{ name: 'a', content: 'a' }]);
    await assertRefused(
      { source: 'archive', format: 'tar.gz', data: tar.toString('base64') },
      'validation.invalid_request',
      /not a readable tar\.gz archive: incorrect header check/,
    );
    await assertRefused({ source: 'archive', format: 'tar', data: Buffer.alloc(600, 7).toString('base64') }, 'validation.invalid_request', /not a readable tar archive/);
  });
});

describe('sent workspaces: caps (limits.workspace_too_large, naming the cap)', () => {
  const small: SentWorkspaceCaps = { maxEntries: 5, maxBytes: 100, maxFileBytes: 60 };

  it('counts entries: files, directories and links', async () => {
    const files = Array.from({ length: 6 }, (_, index) => ({ path: `f${index}`, content: '' }));
    const early = await assertRefused(inline(files), 'limits.workspace_too_large', /workspace\.files has 6 files, over the cap runJob\.maxWorkspaceFiles = 5/, small);
    assert.deepEqual(early, { field: 'workspace.files', cap: 'runJob.maxWorkspaceFiles', limit: 5, value: 6 });
    // Five files, but their directories count too.
    const nested = Array.from({ length: 5 }, (_, index) => ({ path: `d${index}/f`, content: '' }));
    await assertRefused(inline(nested), 'limits.workspace_too_large', /more than 5 entries \(files, directories and links\), over the cap runJob\.maxWorkspaceFiles = 5/, small);
    const entries = Array.from({ length: 6 }, (_, index) => ({ name: `e${index}`, type: 'directory' as const }));
    await assertRefused(await archive(entries), 'limits.workspace_too_large', /runJob\.maxWorkspaceFiles = 5/, small);
  });

  it('caps one file and all files together', async () => {
    const one = await assertRefused(
      await archive([{ name: 'big', content: 'x'.repeat(61) }]),
      'limits.workspace_too_large',
      /"big" is 61 bytes, over the cap runJob\.maxFileBytes = 60/,
      small,
    );
    assert.deepEqual(one, { field: 'workspace.data', cap: 'runJob.maxFileBytes', limit: 60, value: 61 });
    await assertRefused(
      inline([
        { path: 'a', content: 'x'.repeat(60) },
        { path: 'b', content: 'x'.repeat(41) },
      ]),
      'limits.workspace_too_large',
      /come to at least 101 bytes .* over the cap runJob\.maxWorkspaceBytes = 100/,
      small,
    );
  });

  it('caps depth', async () => {
    const path = Array.from({ length: 129 }, () => 'd').join('/');
    const details = await assertRefused(inline([{ path, content: '' }]), 'limits.workspace_too_large', /is 129 levels deep, over the cap of 128 levels/, {
      ...CAPS,
      maxEntries: 1000,
    });
    assert.equal(details.cap, 'depth');
  });

  it('stops a gzip bomb within about a megabyte of expansion, whatever the caps', async () => {
    const bomb = await gzipBomb(64 * 1024 * 1024);
    assert.ok(bomb.length < 128 * 1024, `bomb is ${bomb.length} bytes`);
    const huge: SentWorkspaceCaps = { maxEntries: 200_000, maxBytes: 2 * 1024 ** 3, maxFileBytes: 2 * 1024 ** 3 };
    const details = await assertRefused(
      { source: 'archive', format: 'tar.gz', data: bomb.toString('base64') },
      'limits.workspace_too_large',
      /the archive expands to more than/,
      huge,
    );
    assert.equal(details.cap, 'archive expansion');
    // What it expanded says it stopped early; how long that took is the machine's.
    assert.ok((details.value as number) < 4 * 1024 * 1024, `expanded ${String(details.value)} bytes before the refusal`);
  });

  it('refuses a compressed file larger than the caps from its header, before expanding it', async () => {
    const tarGz = await makeTarGz([{ name: 'zeros', content: Buffer.alloc(8 * 1024 * 1024) }]);
    await assertRefused(
      { source: 'archive', format: 'tar.gz', data: tarGz.toString('base64') },
      'limits.workspace_too_large',
      /"zeros" is 8388608 bytes, over the cap runJob\.maxFileBytes/,
    );
  });
});
