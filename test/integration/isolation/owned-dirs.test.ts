import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { reapDeadOwners } from '../../../src/isolation/host/owned-dirs.js';

/**
 * The reaper of a dead process's scratch dirs (isolation/host/owned-dirs.ts), run by every backend's
 * probe: a dir it cannot remove yet must not fail the probe. A CI run met one still mounted
 * (EBUSY) and local_process was reported unavailable for a whole test file.
 */
describe('reaping the scratch dirs of dead processes', () => {
  it('removes what it can and leaves a dir that is still a mount point, without failing', async () => {
    const root = mkdtempSync(join(tmpdir(), 'owned-'));
    const gone = join(root, '999999999-gone');
    const mounted = join(root, '999999998-mounted');
    const live = join(root, `${process.pid}-live`);
    for (const dir of [gone, mounted, live]) mkdirSync(dir);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mounted]);
    try {
      assert.equal(await reapDeadOwners(root), 1);
      assert.deepEqual([existsSync(gone), existsSync(mounted), existsSync(live)], [false, true, true]);
    } finally {
      execFileSync('umount', [mounted]);
      rmSync(root, { recursive: true, force: true });
    }
  });
});
