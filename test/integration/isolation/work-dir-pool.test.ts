import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chownSync,
  linkSync,
  closeSync,
  existsSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { WorkDirPool } from '../../../src/isolation/host/work-dir-pool.js';

const notRoot = process.getuid?.() !== 0 && 'tmpfs mounts need root';

/** A sandbox's two host ids: its user's (inside 1000) and its root's. */
const idsOf = (user: number, rootId: number) => [
  { inside: 0, host: rootId, count: 1 },
  { inside: 1000, host: user, count: 1 },
];

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

  it('keeps a disk whole, and a later lease with other host ids takes it up with its files, shown as owned by its own ids', async () => {
    const root = mkdtempSync(join(tmpdir(), 'workdirs-'));
    const kept = mkdtempSync(join(tmpdir(), 'kept-disk-'));
    const pool = new WorkDirPool(root);
    try {
      const first = await pool.lease(16 << 20, 64100, { withLayer: true, ids: idsOf(64100, 64101) });
      assert.ok(first.disk, 'a disk of its own can be kept');
      writeFileSync(join(first.path, 'mine.txt'), "the user's");
      chownSync(join(first.path, 'mine.txt'), 64100, 64100);
      mkdirSync(join(first.layer!, 'upper'));
      writeFileSync(join(first.layer!, 'upper', 'roots.txt'), "root's");
      chownSync(join(first.layer!, 'upper', 'roots.txt'), 64101, 64101);
      symlinkSync('/etc/passwd', join(first.path, 'link'));
      const copied = join(kept, 'copy.img');
      await first.disk.copy(copied);
      writeFileSync(join(first.path, 'after-copy.txt'), 'not in the copy');
      const image = join(kept, 'disk.img');
      await first.disk.keep(image);
      assert.equal(readdirSync(root).filter((name) => !name.startsWith('.')).length, 0, 'nothing of the kept disk is left in the pool');

      // Taken up by a job whose user is 64102 and root 64103: each file is the same one's inside.
      const second = await pool.lease(16 << 20, 64102, { withLayer: true, ids: idsOf(64102, 64103), from: { image, take: true } });
      assert.equal(readFileSync(join(second.path, 'mine.txt'), 'utf8'), "the user's");
      assert.equal(lstatSync(join(second.path, 'mine.txt')).uid, 64102);
      assert.equal(lstatSync(join(second.path)).uid, 64102);
      assert.equal(lstatSync(join(second.layer!, 'upper', 'roots.txt')).uid, 64103);
      assert.equal(readlinkSync(join(second.path, 'link')), '/etc/passwd', 'a link is kept as a link');
      assert.equal(statSync('/etc/passwd').uid, 0, 'and what it points at is not touched');
      assert.ok(existsSync(join(second.path, 'after-copy.txt')));

      // The copy is of its instant, and taken up apart from the disk it was copied from.
      const third = await pool.lease(16 << 20, 64104, { ids: idsOf(64104, 64105), from: { image: copied, take: false } });
      assert.equal(existsSync(join(third.path, 'after-copy.txt')), false);
      assert.equal(lstatSync(join(third.path, 'mine.txt')).uid, 64104);
      writeFileSync(join(third.path, 'mine.txt'), 'changed in the copy');
      assert.equal(readFileSync(join(second.path, 'mine.txt'), 'utf8'), "the user's");
      await Promise.all([second.release(), third.release()]);
      assert.deepEqual(
        readdirSync(root).filter((name) => !name.startsWith('.')),
        [],
        'a disk taken up is not pooled after',
      );
      // A job that took a kept disk up and ended (a resume that failed) left it whole, its ids
      // those of its files: it is taken up again by the next.
      const fourth = await pool.lease(16 << 20, 64106, { withLayer: true, ids: idsOf(64106, 64107), from: { image, take: true } });
      assert.equal(readFileSync(join(fourth.path, 'mine.txt'), 'utf8'), "the user's");
      assert.equal(lstatSync(join(fourth.path, 'mine.txt')).uid, 64106);
      assert.equal(lstatSync(join(fourth.layer!, 'upper', 'roots.txt')).uid, 64107);
      await fourth.release();
    } finally {
      await pool.dispose();
      rmSync(kept, { recursive: true, force: true });
    }
  });

  it("shows a file whose owner's uid is the same in the new ids as its owner's still: a disk taken up by a job that got the user's uid back, its root another", async () => {
    const kept = mkdtempSync(join(tmpdir(), 'kept-disk-'));
    const pool = new WorkDirPool(mkdtempSync(join(tmpdir(), 'workdirs-')));
    try {
      const first = await pool.lease(16 << 20, 64120, { ids: idsOf(64120, 64121) });
      writeFileSync(join(first.path, 'mine.txt'), "the user's");
      chownSync(join(first.path, 'mine.txt'), 64120, 64120);
      const image = join(kept, 'disk.img');
      await first.disk!.keep(image);
      // The same user uid, another root: before, the view's map left the user out, so the file was no one's.
      const second = await pool.lease(16 << 20, 64120, { ids: idsOf(64120, 64122), from: { image, take: true } });
      assert.equal(lstatSync(join(second.path, 'mine.txt')).uid, 64120);
      assert.equal(lstatSync(second.path).uid, 64120);
      await second.release();
    } finally {
      await pool.dispose();
      rmSync(kept, { recursive: true, force: true });
    }
  });

  it("gives each file its owner once, however many names it has: a disk taken up by ids that swap the user's and root's", async () => {
    const kept = mkdtempSync(join(tmpdir(), 'kept-disk-'));
    const pool = new WorkDirPool(mkdtempSync(join(tmpdir(), 'workdirs-')));
    try {
      const first = await pool.lease(64 << 20, 64110, { ids: idsOf(64110, 64111) });
      for (const [name, owner] of [
        ['users', 64110],
        ['roots', 64111],
      ] as const) {
        writeFileSync(join(first.path, name), name);
        chownSync(join(first.path, name), owner, owner);
        for (let n = 0; n < 3; n++) linkSync(join(first.path, name), join(first.path, `${name}-${n}`));
      }
      // Deeper than any walk of the tree would go (image-root's shift stops at 4,096 levels).
      execFileSync('/usr/bin/python3', ['-c', "import os\nfor _ in range(5000): os.mkdir('d'); os.chdir('d')"], { cwd: first.path });
      const image = join(kept, 'disk.img');
      await first.disk!.keep(image);
      const second = await pool.lease(64 << 20, 64111, { ids: idsOf(64111, 64110), from: { image, take: true } });
      for (const suffix of ['', '-0', '-1', '-2']) {
        assert.equal(lstatSync(join(second.path, `users${suffix}`)).uid, 64111, `users${suffix} is the new user's`);
        assert.equal(lstatSync(join(second.path, `roots${suffix}`)).uid, 64110, `roots${suffix} is the new root's`);
      }
      await second.release();
    } finally {
      await pool.dispose();
      rmSync(kept, { recursive: true, force: true });
    }
  });
});
