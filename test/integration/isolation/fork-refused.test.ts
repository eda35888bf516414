import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { BubblewrapBackend } from '../../../src/isolation/bubblewrap/bubblewrap-backend.js';
import { uidHolders } from '../../../src/isolation/host/process-tree.js';
import { UidPool } from '../../../src/isolation/host/uid-pool.js';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * CI, twice: a probe's bwrap was refused its fork for pid 1 (EAGAIN) four times in a row on one
 * uid, with no live process of the host running as it. Zombies are what counted: every sandbox's
 * init is orphaned when bwrap's launcher exits, and a host init that reaps seconds later (this
 * machine's) leaves a run of short jobs on one uid with a zombie each against its RLIMIT_NPROC.
 * A uid rests until nothing is counted against it; one refused a fork all the same is set aside.
 */

const ZOMBIES = fileURLToPath(new URL('../../fixtures/uids/zombies.py', import.meta.url));
/** Away from the ranges the suite's runtimes (64,100) and other uid tests use. */
const BASE = 64_960;
/** With bwrap and its child, over a snippet's process limit (64), and so over the probe's (8). */
const COUNT = 64;

/** A root process holding `COUNT` zombies of `uid` until it is ended. */
async function zombiesOf(uid: number): Promise<{ end: () => Promise<void> }> {
  const parent: ChildProcessWithoutNullStreams = spawn('/usr/bin/python3', [ZOMBIES, String(uid), String(COUNT)]);
  await new Promise<void>((resolve, reject) => {
    parent.stdout.once('data', () => resolve());
    parent.once('exit', (code) => reject(new Error(`the zombies' parent exited (${code})`)));
  });
  return {
    end: () =>
      new Promise<void>((resolve) => {
        parent.once('exit', () => resolve());
        parent.stdin.end();
      }),
  };
}

function backendOn(base: number, uidCount: number): BubblewrapBackend {
  const dir = mkdtempSync(join(tmpdir(), 'fork-refused-'));
  // The sandbox's uid reads the files the runtime dir holds for it.
  chmodSync(dir, 0o755);
  return new BubblewrapBackend({ runtimeDir: join(dir, 'runtime'), uidLockDir: join(dir, 'uids'), uidBase: base, uidCount, warmPerTemplate: 0 });
}

const hello = { lang: 'bash', code: 'echo hello' } as const;

describe('what is counted against a uid’s process limit', () => {
  it('is found with its zombies and threads, which a search for live processes misses', async () => {
    const zombies = await zombiesOf(BASE);
    try {
      const holders = uidHolders(BASE);
      assert.equal(holders.length, COUNT);
      assert.ok(holders.every(({ state, threads, realUid }) => state === 'Z' && threads === 1 && realUid === BASE));
    } finally {
      await zombies.end();
    }
  });

  it('keeps a uid given back from the next job while it lasts; the uid rests, and is taken only when no other is', async () => {
    const pool = new UidPool(BASE + 1, 2, mkdtempSync(join(tmpdir(), 'uid-locks-')));
    const first = await pool.acquire();
    const zombies = await zombiesOf(first);
    try {
      pool.release(first);
      const second = await pool.acquire();
      assert.equal(second, BASE + 2, 'a fresh uid, not the one still counted');
      assert.equal(await pool.acquire(), first, 'the resting one, when the range has no other');
    } finally {
      await zombies.end();
    }
  });

  it('makes the probe set the uid aside and go on with the next', async () => {
    const zombies = await zombiesOf(BASE + 3);
    const runtime = testRuntime({}, { backend: backendOn(BASE + 3, 2) });
    try {
      const done = await executeSnippet(hello, { runtime });
      assert.equal(done.stdout, 'hello\n', done.stderr);
      // Not handed out again: a second job meets no refusal either.
      const again = await executeSnippet(hello, { runtime });
      assert.equal(again.stdout, 'hello\n', again.stderr);
    } finally {
      await runtime.dispose();
      await zombies.end();
    }
  });

  it('fails a job refused a fork, naming what is counted, and the uid is set aside', async () => {
    const runtime = testRuntime({}, { backend: backendOn(BASE + 5, 1) });
    try {
      const first = await executeSnippet(hello, { runtime });
      assert.equal(first.stdout, 'hello\n', first.stderr);
      // The range's one uid, resting or free, filled before the next job takes it.
      const zombies = await zombiesOf(BASE + 5);
      try {
        const refused = await executeSnippet(hello, { runtime });
        assert.notEqual(refused.exit_code, 0);
        assert.match(refused.stderr, new RegExp(`uid ${BASE + 5}: \\d+ other processes, \\d+ threads \\(.*\\d+ python3 Z of \\d+`));
        const none = await executeSnippet(hello, { runtime });
        assert.match(none.stderr, new RegExp(`no uid of 1 from ${BASE + 5} is free: .*\\(1 set aside here`));
      } finally {
        await zombies.end();
      }
    } finally {
      await runtime.dispose();
    }
  });

  it('hands a uid given back to a job waiting for one, once it rests clean; a sandbox started ahead never takes a resting one', async () => {
    const pool = new UidPool(BASE + 6, 1, mkdtempSync(join(tmpdir(), 'uid-locks-')));
    const uid = await pool.acquire();
    const waiting = pool.acquire();
    pool.release(uid);
    assert.equal(await waiting, uid);
    pool.release(uid);
    assert.equal(pool.tryAcquire(false), undefined, 'not for a sandbox started ahead');
    assert.equal(pool.tryAcquire(), uid, 'for a job, when no other uid is');
  });

  it('refuses a job waiting for a uid once the last one out is set aside, instead of leaving it waiting for ever', async () => {
    const pool = new UidPool(BASE + 7, 1, mkdtempSync(join(tmpdir(), 'uid-locks-')));
    const uid = await pool.acquire();
    const waiting = pool.acquire();
    pool.setAside(uid);
    pool.release(uid);
    await assert.rejects(waiting, new RegExp(`no uid of 1 from ${BASE + 7} is free: .*\\(1 set aside here`));
  });
});
