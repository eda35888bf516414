import assert from 'node:assert/strict';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { WorkDirPool } from '../../../src/sandbox/host/work-dir-pool.js';

const notRoot = process.getuid?.() !== 0 && 'tmpfs mounts need root';

describe('work-dir pool', { skip: notRoot }, () => {
  it('reuses a mount, but every lease starts empty and owned by its own uid', async () => {
    const pool = new WorkDirPool(mkdtempSync(join(tmpdir(), 'workdirs-')));
    try {
      const victim = mkdtempSync(join(tmpdir(), 'victim-'));
      writeFileSync(join(victim, 'keep'), 'host file');
      const first = await pool.lease(1 << 20, 64100);
      writeFileSync(join(first.path, 'left-behind'), 'from job one');
      symlinkSync(victim, join(first.path, 'planted'));
      await first.release();
      assert.equal(readFileSync(join(victim, 'keep'), 'utf8'), 'host file', 'release deletes links, not what they point at');
      const second = await pool.lease(1 << 20, 64101);
      assert.equal(dirname(second.path), dirname(first.path), 'the mount was reused');
      assert.deepEqual(readdirSync(second.path), []);
      assert.equal(lstatSync(second.path).uid, 64101);
      await second.release();
    } finally {
      await pool.dispose();
    }
  });

  it('bounds the work dir to its size', async () => {
    const pool = new WorkDirPool(mkdtempSync(join(tmpdir(), 'workdirs-')));
    try {
      const lease = await pool.lease(1 << 20, 64100);
      assert.throws(() => writeFileSync(join(lease.path, 'big'), Buffer.alloc(2 << 20)), /ENOSPC/);
      await lease.release();
    } finally {
      await pool.dispose();
    }
  });
});
