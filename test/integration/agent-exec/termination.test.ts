import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ok, pgrep, jobDirs, UNTIL_IT_ENDS } from '../../helpers/agent-exec.js';
import { waitUntil } from '../../helpers/wait.js';

/**
 * A tree that resists: the shell ignores SIGTERM (and its children inherit that), one child
 * traps it, and a grandchild has left the tree with setsid + nohup, its output sent elsewhere.
 * `tag` makes every process's command line findable with pgrep.
 */
function stubbornTree(tag: string): string[] {
  return ['sh', '-c', `trap "" TERM; setsid nohup sleep 3000${tag} >/dev/null 2>&1 & (trap "" TERM; sleep 3001${tag}) & echo started; sleep 3002${tag}`];
}

/** Nothing of the tree, shells and bwrap included (their command lines hold the tag too). */
async function assertNothingLeft(tag: string): Promise<void> {
  await waitUntil(() => pgrep(`sleep 300[0-2]${tag}`).length === 0, `nothing of tree ${tag} is left`).catch(() => undefined);
  assert.deepEqual(pgrep(`sleep 300[0-2]${tag}`), []);
}

describe('agent-exec takes down whole process trees', () => {
  const { root, cwd } = jobDirs('agent-exec-kill');

  for (const sandbox of ['none', 'workspace'] as const) {
    it(`--timeout then --kill-after: a SIGTERM-proof tree and its daemonised grandchild are gone (--sandbox ${sandbox})`, async () => {
      const tag = sandbox === 'none' ? '1' : '2';
      const started = Date.now();
      // The timeout leaves the shell room to set its trap (a loaded CI machine needs it); the wait
      // is not the subject: the tree ignores SIGTERM, so only the SIGKILL can end it, and 'killed' says it came.
      const response = await ok(root, ['run', '--cwd', cwd, '--sandbox', sandbox, '--timeout', '5', '--kill-after', '1', ...UNTIL_IT_ENDS, '--', ...stubbornTree(tag)]);
      assert.equal(response.state, 'killed');
      assert.equal(response.reason, 'timeout');
      assert.equal(response.stdout, 'started\n');
      // SIGTERM at 5 s was ignored; SIGKILL came a second later.
      assert.ok(Date.now() - started >= 6000);
      assert.ok((response.elapsed_ms as number) >= 5900, `elapsed ${response.elapsed_ms} ms`);
      await assertNothingLeft(tag);
    });

    it(`kill ends the same tree on request, SIGKILL after the grace (--sandbox ${sandbox})`, async () => {
      const tag = sandbox === 'none' ? '3' : '4';
      const run = await ok(root, ['run', '--cwd', cwd, '--sandbox', sandbox, '--kill-after', '1', '--until', '0.5', '--', ...stubbornTree(tag)]);
      assert.equal(run.state, 'running');
      // --until 0.5 is when run answers, not a promise that the shell has started all three yet.
      await waitUntil(() => pgrep(`^sleep 300[0-2]${tag}$`).length >= 3, `the three sleeps of tree ${tag} run`).catch(() => undefined);
      assert.equal(pgrep(`^sleep 300[0-2]${tag}$`).length, 3, 'all three sleeps run before the kill');
      const kill = await ok(root, ['kill', run.job_id]);
      assert.equal(kill.state, 'killed');
      assert.equal(kill.reason, 'kill');
      await assertNothingLeft(tag);
    });
  }

  it('kill --signal KILL ends a job at once', async () => {
    const run = await ok(root, ['run', '--cwd', cwd, '--sandbox', 'none', '--kill-after', '3600', '--no-wait', '--', ...stubbornTree('5')]);
    const started = Date.now();
    const kill = await ok(root, ['kill', run.job_id, '--signal', 'KILL']);
    assert.equal(kill.signal, 'SIGKILL');
    assert.equal(kill.state, 'killed');
    // At once: the tree ignores SIGTERM, so a kill that went through the hour's grace would take that long.
    assert.ok(Date.now() - started < 60_000, `kill took ${Date.now() - started} ms`);
    await assertNothingLeft('5');
  });

  it('a job that handles SIGTERM ends on it, within the grace', async () => {
    const run = await ok(root, [
      'run',
      '--cwd',
      cwd,
      '--kill-after',
      '30',
      '--until',
      '0.5',
      '--',
      'sh',
      '-c',
      'trap "echo bye; exit 7" TERM; echo up; while :; do sleep 0.1; done',
    ]);
    // "up" comes after the trap is set: a SIGTERM before it would meet sh's default action.
    await waitUntil(async () => (await ok(root, ['tail', run.job_id])).stdout === 'up\n', 'the job has set its trap');
    const kill = await ok(root, ['kill', run.job_id]);
    assert.equal(kill.state, 'killed');
    assert.equal(kill.exit_code, 7);
    assert.equal((await ok(root, ['tail', run.job_id])).stdout, 'up\nbye\n');
  });

  it('when the job exits, what it left running goes with it (--sandbox none)', async () => {
    const response = await ok(root, ['run', '--cwd', cwd, '--sandbox', 'none', '--until', '20', '--', 'sh', '-c', 'setsid nohup sleep 30006 >/dev/null 2>&1 & echo parent done']);
    assert.equal(response.state, 'exited');
    assert.equal(response.exit_code, 0);
    assert.deepEqual(pgrep('sleep 30006'), []);
  });
});
