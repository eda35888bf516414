import assert from 'node:assert/strict';
import { closeSync, fsyncSync, lstatSync, mkdtempSync, openSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
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

  it('gives the blocks a job wrote back to the host when the work dir is released', async () => {
    const root = mkdtempSync(join(tmpdir(), 'workdirs-'));
    const pool = new WorkDirPool(root);
    // The blocks the pool's images hold on the host's disk (a tmpfs host has none).
    const allocated = () =>
      readdirSync(root)
        .filter((name) => name.endsWith('.img'))
        .reduce((sum, name) => sum + statSync(join(root, name)).blocks * 512, 0);
    try {
      const lease = await pool.lease(128 << 20, 64100);
      const empty = allocated();
      for (let n = 0; n < 12; n++) {
        // Synced: the blocks reach the image, as a job's do once they are written back.
        const fd = openSync(join(lease.path, `f${n}`), 'w');
        writeSync(fd, Buffer.alloc(8 << 20, 1));
        fsyncSync(fd);
        closeSync(fd);
      }
      assert.ok(allocated() > empty + (64 << 20), `the image holds ${allocated()} bytes after 96 MiB were written`);
      await lease.release();
      const again = await pool.lease(128 << 20, 64101);
      assert.equal(dirname(again.path), dirname(lease.path), 'the mount was reused');
      assert.ok(allocated() < empty + (4 << 20), `the image holds ${allocated()} bytes, ${empty} when empty, after 96 MiB were written and released`);
      await again.release();
    } finally {
      await pool.dispose();
    }
  });
});
