import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isAlive } from '../../../src/isolation/host/process-tree.js';
import { UidPool } from '../../../src/isolation/host/uid-pool.js';

describe('the uid pool', () => {
  it('kills what still runs as a newly claimed uid before its first job (a dead runner’s leftovers would take its forks)', async () => {
    // A uid well away from the pools the suite's runtimes use, with a lock dir of its own.
    const uid = 64_990;
    const leftover = spawn('/usr/bin/sleep', ['60'], { uid, gid: uid, stdio: 'ignore' });
    await new Promise((resolve) => leftover.once('spawn', resolve));
    const pool = new UidPool(uid, 1, mkdtempSync(join(tmpdir(), 'uid-locks-')));
    const claimed = pool.tryAcquire();
    assert.equal(claimed, uid);
    assert.ok(isAlive(leftover.pid!));
    await pool.ready(uid);
    await new Promise((resolve) => (leftover.exitCode !== null || leftover.signalCode !== null ? resolve(null) : leftover.once('exit', resolve)));
    assert.equal(leftover.signalCode, 'SIGKILL');
    // Swept once: the pool's own later jobs on it are not looked for again.
    pool.release(uid);
    assert.equal(pool.tryAcquire(), uid);
  });

  it('claims blocks of uids, and sweeps a whole block: what runs as any uid of it is killed before its first sandbox', async () => {
    // A block far from the suite's (which start at 1,000,000,000), with a lock dir of its own.
    const base = 900_000_000;
    const span = 65_536;
    const shared = mkdtempSync(join(tmpdir(), 'uid-blocks-'));
    const [first, second] = [new UidPool(base, 2, shared, span), new UidPool(base, 2, shared, span)];
    assert.deepEqual([first.tryAcquire(), second.tryAcquire(), second.tryAcquire()], [base, base + span, undefined]);
    const inside = base + 42;
    const leftover = spawn('/usr/bin/sleep', ['60'], { uid: inside, gid: inside, stdio: 'ignore' });
    await new Promise((resolve) => leftover.once('spawn', resolve));
    const pool = new UidPool(base, 2, mkdtempSync(join(tmpdir(), 'uid-blocks-')), span);
    assert.equal(pool.tryAcquire(), base);
    await pool.ready(base);
    await new Promise((resolve) => (leftover.exitCode !== null || leftover.signalCode !== null ? resolve(null) : leftover.once('exit', resolve)));
    assert.equal(leftover.signalCode, 'SIGKILL');
  });
});
