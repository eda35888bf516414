import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isAlive } from '../../../src/sandbox/host/process-tree.js';
import { UidPool } from '../../../src/sandbox/host/uid-pool.js';

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
});
