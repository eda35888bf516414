import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { agentExec, jobDirs, ok, removeDir, rootWithFixtures, type Response, UNTIL_IT_ENDS } from '../../helpers/agent-exec.js';
import { waitUntil } from '../../helpers/wait.js';

const ids = (response: Response) => (response.jobs as Array<{ job_id: string }>).map((job) => job.job_id);

describe('agent-exec delete and gc', () => {
  const roots = [rootWithFixtures(), rootWithFixtures()];
  after(() => roots.forEach(removeDir));

  it('gc --dry-run lists what would go and deletes nothing; gc deletes it; running and unknown jobs stay', async () => {
    const [root] = roots as [string];
    const dry = await ok(root, ['gc', '--older-than', '30d', '--dry-run']);
    assert.deepEqual(ids(dry), ['c0ffee000001', 'c0ffee100002']);
    assert.deepEqual(
      (dry.jobs as Array<{ reason: string }>).map((job) => job.reason),
      ['age', 'age'],
    );
    assert.deepEqual([dry.dry_run, dry.policy_source, dry.older_than_s, dry.keep, dry.deleted, dry.kept, dry.skipped], [true, 'flags', 30 * 86_400, null, 0, 1, 1]);
    assert.equal(readdirSync(join(root, 'jobs')).length, 4);

    const gc = await ok(root, ['gc', '--keep', '2']);
    assert.deepEqual(ids(gc), ['c0ffee000001'], 'three jobs for two places: the oldest ended one goes');
    assert.deepEqual([gc.deleted, gc.kept], [1, 2]);
    assert.equal(existsSync(join(root, 'jobs', 'c0ffee000001')), false);
    assert.deepEqual(ids(await ok(root, ['gc', '--keep', '0'])), ['c0ffee100002'], 'the unknown job is never collected');
  });

  it('delete removes a job that is not running, by prefix; it is job_not_found afterwards', async () => {
    const [, root] = roots as [string, string];
    const deleted = await ok(root, ['delete', 'dead']);
    assert.deepEqual([deleted.job_id, deleted.state, deleted.root], ['deadbeef0001', 'unknown', root]);
    assert.equal(existsSync(join(root, 'jobs', 'deadbeef0001')), false);
    const { code, response } = await agentExec(root, ['status', 'deadbeef0001']);
    assert.equal(code, 1);
    assert.equal(response.error.code, 'job_not_found');
  });
});

describe('agent-exec delete and retention with real jobs', () => {
  const { root, cwd } = jobDirs('agent-exec-cleanup');
  const fixtures = rootWithFixtures();
  after(() => removeDir(fixtures));

  it('tags: given at run, shown by status and list, list --tag keeps jobs with all of them', async () => {
    const tagged = await ok(root, ['run', '--cwd', cwd, '--tag', 'ci', '--tag', 'project.build', '--tag', 'ci', '--sandbox', 'none', '--', 'true']);
    assert.deepEqual((await ok(root, ['status', tagged.job_id])).tags, ['ci', 'project.build']);
    const listed = await ok(root, ['list', '--tag', 'project.build', '--tag', 'ci']);
    assert.deepEqual(ids(listed), [tagged.job_id]);
    assert.deepEqual((listed.jobs as Array<{ tags: string[] }>)[0]!.tags, ['ci', 'project.build']);
    assert.deepEqual(ids(await ok(root, ['list', '--tag', 'ci', '--tag', 'release'])), []);
  });

  it('delete refuses a running job (invalid_state, nothing removed) until it is killed', async () => {
    const run = await ok(root, ['run', '--cwd', cwd, '--no-wait', '--sandbox', 'none', '--', 'sleep', '120']);
    const refused = await agentExec(root, ['delete', run.job_id]);
    assert.equal(refused.code, 1);
    assert.equal(refused.response.error.code, 'invalid_state');
    assert.match(refused.response.error.message, /kill/);
    assert.equal((await ok(root, ['status', run.job_id])).state, 'running');
    await ok(root, ['kill', run.job_id]);
    assert.equal((await ok(root, ['delete', run.job_id])).state, 'killed');
    assert.equal(existsSync(join(root, 'jobs', run.job_id)), false);
  });

  it('a job that ends applies the configured retention to its root (at most every intervalMinutes)', async () => {
    // Four jobs for two places: the two old fixtures that ended go, the unknown one and the new one stay.
    const env = { AGENT_RUNNER_RETENTION__MAX_COUNT: '2' };
    const run = await ok(fixtures, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--sandbox', 'none', '--', 'true'], { env });
    assert.equal(run.state, 'exited');
    await waitUntil(() => !existsSync(join(fixtures, 'jobs', 'c0ffee100002')), 'the supervisor has applied the retention');
    assert.deepEqual(readdirSync(join(fixtures, 'jobs')).sort(), [run.job_id, 'badbad000000', 'deadbeef0001'].sort());
  });
});
