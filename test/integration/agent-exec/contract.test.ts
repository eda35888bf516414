import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { agentExec, ok, removeDir, rootWithFixtures, tempDir } from '../../helpers/agent-exec.js';

describe('agent-exec contract', () => {
  const root = rootWithFixtures();
  const empty = tempDir('agent-exec-empty-');
  after(() => [root, empty].forEach(removeDir));

  it('schema prints the shipped schema, draft-07, with when it last changed', async () => {
    const response = await ok(empty, ['schema']);
    assert.equal(response.type, 'schema');
    assert.equal(response.schema_format, 'json-schema-draft-07');
    assert.equal((response.schema as { title: string }).title, 'agent-exec CLI response schema');
    assert.equal(response.generated_at, '2026-11-25T00:00:00Z');
  });

  for (const [name, args] of [
    ['an unknown option', ['run', '--bogus', '--', 'true']],
    ['an unknown command', ['frob']],
    ['no command at all', []],
    ['a bad number', ['run', '--until', 'soon', '--', 'true']],
    ['a bad choice', ['run', '--sandbox', 'vm', '--', 'true']],
    ['conflicting options', ['run', '--no-wait', '--forever', '--', 'true']],
    ['a missing argv', ['run']],
    ['a bad signal', ['kill', 'c0ffee000001', '--signal', 'NOPE']],
    ['a bad --env', ['run', '--env', 'NOEQUALS', '--', 'true']],
    ['--network none without the sandbox', ['run', '--sandbox', 'none', '--network', 'none', '--', 'true']],
    ['a bad duration', ['gc', '--older-than', 'soon']],
    ['a bad tag', ['run', '--tag', 'two words', '--', 'true']],
    ['a --notify-url that is not http(s)', ['run', '--notify-url', 'ftp://example.com/', '--', 'true']],
    ['delete without an id', ['delete']],
  ] as const) {
    it(`answers ${name} with an invalid_argument error object on stdout and exit 2`, async () => {
      const { code, response, stderr } = await agentExec(root, [...args]);
      assert.equal(code, 2);
      assert.equal(response.ok, false);
      assert.equal(response.error.code, 'invalid_argument');
      assert.equal(response.error.retryable, false);
      assert.ok(response.error.message.length > 0);
      assert.notEqual(stderr, '', 'a diagnostic for people goes to stderr');
    });
  }

  it('a bad --timeout names the option and the value', async () => {
    const { response } = await agentExec(root, ['run', '--timeout', 'abc', '--', 'true']);
    assert.match(response.error.message, /--timeout <seconds>.*'abc'.*expected seconds/);
  });

  it('--help and help CMD answer with a help response, exit 0: the text, and its facts as fields', async () => {
    const { code, response } = await agentExec(empty, ['--help']);
    assert.equal(code, 0);
    assert.equal(response.type, 'help');
    const terms = (response.commands as Array<{ term: string }>).map(({ term }) => term.split(' ')[0]);
    assert.deepEqual(terms, ['run', 'status', 'tail', 'wait', 'kill', 'restart', 'list', 'delete', 'gc', 'schema', 'help']);
    assert.match(response.text as string, /^Usage: agent-exec /);
    assert.doesNotMatch(JSON.stringify(response), /__supervise/);
    for (const args of [
      ['help', 'gc'],
      ['gc', '--help'],
    ]) {
      const gc = await agentExec(empty, args);
      assert.equal(gc.code, 0);
      assert.deepEqual([gc.response.command, gc.response.usage], ['agent-exec gc', 'agent-exec gc [options]']);
      assert.ok((gc.response.options as Array<{ term: string }>).some(({ term }) => term === '--older-than <duration>'));
    }
  });

  it('an unknown id is job_not_found, exit 1', async () => {
    for (const command of ['status', 'tail', 'wait', 'kill', 'restart']) {
      const { code, response } = await agentExec(root, [command, 'feedface']);
      assert.equal(code, 1);
      assert.equal(response.error.code, 'job_not_found');
    }
  });

  it('an ambiguous prefix is ambiguous_job_id and names the candidates', async () => {
    const { code, response } = await agentExec(root, ['status', 'c0ffee']);
    assert.equal(code, 1);
    assert.equal(response.error.code, 'ambiguous_job_id');
    assert.match(response.error.message, /c0ffee000001, c0ffee100002/);
  });

  it('an unambiguous prefix is accepted and the response names the full id', async () => {
    const response = await ok(root, ['status', 'c0ffee0']);
    assert.equal(response.job_id, 'c0ffee000001');
    assert.equal(response.state, 'exited');
    assert.equal(response.exit_code, 0);
    assert.equal((await ok(root, ['status', 'dead'])).job_id, 'deadbeef0001');
  });

  it('a running record whose supervisor is gone is unknown', async () => {
    const response = await ok(root, ['status', 'deadbeef0001']);
    assert.equal(response.state, 'unknown');
    assert.equal((await ok(root, ['wait', 'deadbeef0001', '--until', '5'])).state, 'unknown');
  });

  it('list: newest first, --state, --limit with truncated, unreadable dirs counted as skipped', async () => {
    const all = await ok(root, ['list']);
    assert.deepEqual(
      (all.jobs as Array<{ job_id: string }>).map((job) => job.job_id),
      ['deadbeef0001', 'c0ffee100002', 'c0ffee000001'],
    );
    assert.equal(all.skipped, 1);
    assert.equal(all.truncated, false);
    const limited = await ok(root, ['list', '--limit', '1']);
    assert.equal((limited.jobs as unknown[]).length, 1);
    assert.equal(limited.truncated, true);
    const killed = await ok(root, ['list', '--state', 'killed']);
    assert.deepEqual(
      (killed.jobs as Array<{ job_id: string }>).map((job) => job.job_id),
      ['c0ffee100002'],
    );
    const none = await ok(empty, ['list']);
    assert.deepEqual(none.jobs, []);
    assert.equal(none.skipped, 0);
  });

  it('tail of a finished job reads its logs; kill of a finished job signals nothing', async () => {
    const tail = await ok(root, ['tail', 'c0ffee000001']);
    assert.equal(tail.stdout, 'fixture c0ffee000001\n');
    assert.deepEqual(tail.stdout_range, [0, 21]);
    const kill = await ok(root, ['kill', 'c0ffee000001']);
    assert.equal(kill.signalled, false);
    assert.equal(kill.state, 'exited');
  });
});
