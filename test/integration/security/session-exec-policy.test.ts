import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AgentRunnerClient } from '../../../src/client/client.js';
import { AgentRunnerError } from '../../../src/client/types.js';
import type { SessionCreateRequest, SessionExecRequest } from '../../../src/contract/session.js';
import { availableKinds } from '../../helpers/backends.js';
import { testRuntime } from '../../helpers/runtime.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';

/** Python that runs a shell, and what the shell would print. */
const RUNS_SH = "import subprocess; subprocess.run(['sh', '-c', 'id'])";
const RUNS_ID = "import subprocess; subprocess.run(['/usr/bin/id'])";

/**
 * The attacks on a session's policy (allow_shell false, allowed_commands): python
 * started with its program from stdin or from a file the session was sent, each asking for a
 * shell. Whatever the argv check lets through, the sandbox holds: no shell exists in it, and
 * with allowed_commands nothing else runs either.
 */
describe('a session holds its exec policy inside its sandbox, not only by reading argv', async () => {
  let server: ServerProcess;
  let client: AgentRunnerClient;
  const kinds = await availableKinds(testRuntime(), 'run-job');

  before(async () => {
    server = await startServer([], { env: { AGENT_RUNNER_SESSIONS__MAX: '2' } });
    client = new AgentRunnerClient({ url: server.url, token: server.token! });
  });

  after(async () => {
    await server.stop();
  });

  /**
   * What the command printed, or the refusal its argv got: the shell's `uid=` never shows, an
   * error does (the exec refused inside the sandbox, or the early refusal of the argv).
   */
  async function attempt(id: string, request: SessionExecRequest): Promise<string> {
    let said: string;
    try {
      const result = await client.sessionExec(id, request);
      said = `${result.stdout}${result.stderr}`;
    } catch (error) {
      if (!(error instanceof AgentRunnerError)) throw error;
      assert.equal(error.status, 403, error.message);
      said = error.message;
    }
    assert.doesNotMatch(said, /uid=/);
    assert.match(said, /PermissionError|policy\.shell_denied/);
    return said;
  }

  async function withSession(request: SessionCreateRequest, use: (id: string) => Promise<void>): Promise<void> {
    const session = await client.createSession(request);
    try {
      await use(session.id);
    } finally {
      await client.endSession(session.id);
    }
  }

  const attacks: Array<[string, SessionExecRequest]> = [
    ['python3 - with the program on stdin', { argv: ['python3', '-'], stdin: RUNS_SH }],
    ['python3 /dev/stdin', { argv: ['python3', '/dev/stdin'], stdin: RUNS_SH }],
    ['python3 -m code reading stdin', { argv: ['python3', '-m', 'code'], stdin: RUNS_SH }],
    ['a script sent through the file API', { argv: ['python3', 'sent.py'] }],
  ];

  for (const policy of [{}, { allowed_commands: ['python3'] }]) {
    for (const [name, request] of attacks) {
      it(`${JSON.stringify(policy)}: ${name} does not run sh`, async () => {
        await withSession({ policy }, async (id) => {
          await client.putSessionFile(id, 'sent.py', RUNS_SH);
          await attempt(id, request);
        });
      });
    }
  }

  it('with allowed_commands, a program not listed does not run either, whoever starts it', async () => {
    await withSession({ policy: { allowed_commands: ['python3'] } }, async (id) => {
      await client.putSessionFile(id, 'sent.py', RUNS_ID);
      assert.match(await attempt(id, { argv: ['python3', 'sent.py'] }), /PermissionError: \[Errno 13\] Permission denied: '\/usr\/bin\/id'/);
      // The session itself still works: the listed program runs.
      const listed = await client.sessionExec(id, { argv: ['python3', '--version'] });
      assert.deepEqual([listed.exit_code, /^Python 3/.test(listed.stdout)], [0, true]);
    });
  });

  it('inline code gets the refusal python3 -c gets, as on run jobs: python3 -m timeit -s CODE, perl -MCODE', async () => {
    await withSession({}, async (id) => {
      for (const argv of [
        ['python3', '-c', 'print(1)'],
        ['python3', '-m', 'timeit', '-n', '1', '-s', 'import os; os.system("id")', 'pass'],
        ['perl', '-Mstrict;system(q(id))', '/dev/null'],
      ]) {
        const refused = await client.sessionExec(id, { argv }).then(
          () => assert.fail(`${argv.join(' ')} ran`),
          (error: AgentRunnerError) => error,
        );
        assert.deepEqual([refused.status, refused.code], [403, 'policy.shell_denied']);
        assert.match(refused.reason, /inline code/);
      }
    });
  });

  it('allow_shell still gives a shell to a session that asks for it', async () => {
    await withSession({ policy: { allow_shell: true } }, async (id) => {
      const result = await client.sessionExec(id, { argv: ['sh', '-c', 'id -u'] });
      assert.deepEqual([result.exit_code, result.stdout], [0, '1000\n']);
    });
  });

  for (const kind of kinds.filter((kind) => kind !== 'local_process')) {
    it(`on ${kind}: a script sent through the file API does not run sh, and with allowed_commands not /usr/bin/id either`, async () => {
      await withSession({ backend: { kind } }, async (id) => {
        await client.putSessionFile(id, 'sent.py', RUNS_SH);
        await attempt(id, { argv: ['python3', 'sent.py'] });
      });
      await withSession({ backend: { kind }, policy: { allowed_commands: ['python3'] } }, async (id) => {
        await client.putSessionFile(id, 'sent.py', RUNS_ID);
        assert.match(await attempt(id, { argv: ['python3', 'sent.py'] }), /PermissionError/);
      });
    });
  }
});
