import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { IMAGE_ROOT_HELPER } from '../../../src/images/image-root.js';
import { imageRootDisk, pruneRootDisks } from '../../../src/isolation/microvm/image-root-disk.js';

/** debugfs's words about `path` in the disk (it reads ext4 without mounting it). */
function debugfs(disk: string, request: string): string {
  return execFileSync('/usr/sbin/debugfs', ['-R', request, disk], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
}

/**
 * An image's root disk for microVMs (isolation/microvm/image-root-disk.ts): the layers as the image
 * says, whiteouts applied, an opaque directory hiding what is beneath, owners, setuid bits, hard
 * and symbolic links kept; one disk per set of layers; gone once its layers are.
 */
/** A drive's bytes that every disk here fits in. */
const SLOT = 1024 ** 3;

describe('image root disks', () => {
  const dir = mkdtempSync(join(tmpdir(), 'image-root-disk-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const bottom = join(dir, 'layers', 'bottom');
  const top = join(dir, 'layers', 'top');
  const disks = join(dir, 'disks');
  for (const path of [join(bottom, 'etc'), join(bottom, 'opt', 'tool'), join(bottom, 'usr', 'bin'), join(top, 'opt', 'tool')]) mkdirSync(path, { recursive: true });
  writeFileSync(join(bottom, 'etc', 'gone'), 'deleted above');
  writeFileSync(join(bottom, 'opt', 'tool', 'old'), 'hidden by the opaque directory above');
  writeFileSync(join(bottom, 'usr', 'bin', 'su'), 'setuid');
  chmodSync(join(bottom, 'usr', 'bin', 'su'), 0o4755);
  writeFileSync(join(bottom, 'etc', 'owned'), 'a service account’s');
  chownSync(join(bottom, 'etc', 'owned'), 999, 998);
  linkSync(join(bottom, 'etc', 'owned'), join(bottom, 'etc', 'hard'));
  symlinkSync('../etc/owned', join(bottom, 'usr', 'link'));
  mkdirSync(join(top, 'etc'));
  // The store's marks for overlayfs, made as the store makes them (images/overlay-marks.ts).
  execFileSync(IMAGE_ROOT_HELPER, ['marks', top], { input: 'wetc/gone\0oopt/tool\0' });
  writeFileSync(join(top, 'opt', 'tool', 'new'), 'the layer’s own');

  it('holds the image as its sandboxes see it', async () => {
    const disk = await imageRootDisk(disks, [bottom, top], SLOT);
    assert.deepEqual(
      debugfs(disk, 'ls -p /etc')
        .split('\n')
        .filter((line) => /\/(gone|owned|hard)\//.test(line)).length,
      2,
    );
    assert.match(debugfs(disk, 'ls -p /opt/tool'), /\/new\//);
    assert.doesNotMatch(debugfs(disk, 'ls -p /opt/tool'), /\/old\//);
    const owned = debugfs(disk, 'stat /etc/owned');
    assert.match(owned, /User:\s+999\s+Group:\s+998/);
    assert.match(owned, /Links: 2/);
    assert.match(debugfs(disk, 'stat /usr/bin/su'), /Mode:\s+04755/);
    assert.match(debugfs(disk, 'stat /usr/link'), /Fast link dest: "\.\.\/etc\/owned"/);
    assert.equal(await imageRootDisk(disks, [bottom, top], SLOT), disk, 'the same layers, the same disk, made once');
    assert.deepEqual(readdirSync(join(disks, 'building')), [], 'no staging left behind');
  });

  it('refuses a disk over the bytes its drive holds, keeping none of it', async () => {
    const before = readdirSync(disks).sort();
    await assert.rejects(imageRootDisk(disks, [bottom], 4096), /the image's root disk is over 4096 bytes/);
    assert.deepEqual(readdirSync(disks).sort(), before);
    assert.deepEqual(readdirSync(join(disks, 'building')), [], 'no staging left behind');
  });

  it('goes once its layers have left the store', async () => {
    const kept = await imageRootDisk(disks, [bottom], SLOT);
    const disk = await imageRootDisk(disks, [bottom, top], SLOT);
    rmSync(top, { recursive: true });
    const removed = await pruneRootDisks(disks);
    assert.equal(removed.length, 1);
    assert.ok(!existsSync(disk) && existsSync(kept));
  });
});
