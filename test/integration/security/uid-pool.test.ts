import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { runCli } from '../../helpers/cli.js';

const POOL = fileURLToPath(new URL('../../../dist/isolation/host/uid-pool.js', import.meta.url));

/** A process that claims `count` uids from the shared range, reports them, and holds them until its stdin ends. */
function holder(lockDir: string, count: number): Promise<{ uids: number[]; exit: () => Promise<void> }> {
  const script = `const { UidPool } = await import(${JSON.stringify(POOL)}); const pool = new UidPool(70000, 4, ${JSON.stringify(lockDir)}); const uids = []; for (let i = 0; i < ${count}; i++) uids.push(pool.tryAcquire() ?? null); console.log(JSON.stringify(uids)); process.stdin.resume(); process.stdin.on('end', () => process.exit(0));`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve) => {
    child.stdout.once('data', (chunk: Buffer) =>
      resolve({
        uids: JSON.parse(chunk.toString()) as number[],
        exit: () =>
          new Promise<void>((done) => {
            child.once('exit', () => done());
            child.stdin.end();
          }),
      }),
    );
  });
}

describe('uids are allocated across processes', () => {
  it("two processes never hold the same uid; a dead holder's uids are taken over", async () => {
    const lockDir = mkdtempSync(join(tmpdir(), 'uid-locks-'));
    const first = await holder(lockDir, 3);
    const second = await holder(lockDir, 3);
    assert.deepEqual(first.uids, [70000, 70001, 70002]);
    assert.deepEqual(second.uids, [70003, null, null], 'the rest of the range is held by the first process');
    await first.exit();
    const third = await holder(lockDir, 3);
    assert.deepEqual(third.uids, [70000, 70001, 70002]);
    await second.exit();
    await third.exit();
  });

  it('two pools of one process (two runtimes) never hold the same uid', async () => {
    const lockDir = mkdtempSync(join(tmpdir(), 'uid-locks-'));
    const { UidPool } = (await import(POOL)) as typeof import('../../../src/isolation/host/uid-pool.js');
    const first = new UidPool(70010, 4, lockDir);
    const second = new UidPool(70010, 4, lockDir);
    const uids = [first.tryAcquire(), first.tryAcquire(), second.tryAcquire(), second.tryAcquire(), second.tryAcquire()];
    assert.deepEqual(uids, [70010, 70011, 70012, 70013, undefined]);
  });

  it('two agent-runner processes run sandboxes at the same time without colliding', async () => {
    const runs = await Promise.all(Array.from({ length: 4 }, (_, index) => runCli('agent-runner', ['exec', '--lang', 'bash', '--code', `echo run-${index}; sleep 0.3`])));
    runs.forEach((run, index) => {
      assert.equal(run.code, 0, run.stdout + run.stderr);
      assert.equal(JSON.parse(run.stdout).stdout, `run-${index}\n`);
    });
  });
});
