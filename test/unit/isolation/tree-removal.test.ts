import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { reapDeadOwners } from '../../../src/isolation/host/owned-dirs.js';
import { mountPointsUnder } from '../../../src/isolation/host/tmpfs.js';
import { removeTree } from '../../../src/isolation/host/tree-removal.js';

/** A tmpfs mounted at `at` holding one file, as a volume bound into a VM's share holds the volume's files. */
function mountWithFile(at: string): string {
  mkdirSync(at, { recursive: true });
  execFileSync('/usr/bin/mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tree-removal-test', at]);
  writeFileSync(join(at, 'kept.txt'), 'kept');
  return join(at, 'kept.txt');
}

/**
 * A tree removal never walks into what is mounted in the tree: rm -r would remove a volume's
 * files bound into a VM's directory (qemu-vm.ts shareVolume). Needs root, as the service does
 * to mount volumes.
 */
describe('tree removal and mounts', { skip: process.getuid?.() !== 0 && 'mounting needs root' }, () => {
  it('removeTree refuses a tree with a mount in it, and leaves what is mounted there', async () => {
    const root = mkdtempSync(join(tmpdir(), 'removal-'));
    const kept = mountWithFile(join(root, 'a b', 'volume'));
    try {
      assert.deepEqual(await mountPointsUnder(root), [join(root, 'a b', 'volume')], 'a path with a space is read back from its escape');
      await assert.rejects(removeTree(root), /is mounted in it/);
      assert.equal(readFileSync(kept, 'utf8'), 'kept');
    } finally {
      execFileSync('/usr/bin/umount', [join(root, 'a b', 'volume')]);
    }
    await removeTree(root);
    assert.ok(!existsSync(root));
  });

  it("the reaper leaves a dead owner's directory alone while something is mounted in it", async () => {
    const root = mkdtempSync(join(tmpdir(), 'reaper-'));
    // A pid that no process has (above the kernel's pid_max).
    const orphan = join(root, '4194305-dead');
    const kept = mountWithFile(join(orphan, 'volumes', '0'));
    try {
      assert.equal(await reapDeadOwners(root), 0);
      assert.equal(readFileSync(kept, 'utf8'), 'kept');
    } finally {
      execFileSync('/usr/bin/umount', [join(orphan, 'volumes', '0')]);
    }
    assert.equal(await reapDeadOwners(root), 1);
    await removeTree(root);
  });
});
