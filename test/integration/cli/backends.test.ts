import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { runJob } from '../../../src/runner/run-job.js';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { runTask } from '../../../src/tasks/run-task.js';
import { agentExec, jobDirs } from '../../helpers/agent-exec.js';
import { runCli } from '../../helpers/cli.js';
import { testRuntime } from '../../helpers/runtime.js';

interface Described {
  kind: string;
  aliases: string[];
  available: boolean;
  notes: string[];
  capabilities: Record<string, unknown>;
}

describe('backends by kind', () => {
  it('`agent-runner backends` lists every kind with its availability, reasons and capabilities', async () => {
    const { code, stdout } = await runCli('agent-runner', ['backends']);
    assert.equal(code, 0);
    const backends = JSON.parse(stdout) as Described[];
    assert.deepEqual(
      backends.map((backend) => backend.kind),
      ['local_process', 'gvisor', 'microvm'],
    );
    const local = backends[0]!;
    assert.equal(local.available, true);
    assert.deepEqual(local.aliases, ['bubblewrap']);
    assert.deepEqual(Object.keys(local.capabilities).sort(), ['host_work_dir', 'memory', 'network', 'profiles', 'snapshot']);
    const gvisor = backends[1]!;
    // Available where runsc runs (this host), otherwise with the probe's reason.
    assert.match(gvisor.notes[0]!, gvisor.available ? /^runsc \S+, platform / : /runsc/);
    assert.deepEqual(gvisor.capabilities.profiles, ['snippet', 'task', 'run-job']);
    const microvm = backends[2]!;
    assert.deepEqual(microvm.aliases, ['firecracker']);
    assert.equal(microvm.available, false);
    assert.ok(microvm.notes.length > 0, 'an unavailable kind says why');
  });

  const runtime = testRuntime();
  after(() => runtime.dispose());

  it("a run job on a kind that cannot run here ends backend_unavailable with the probe's reason, never elsewhere", async () => {
    const result = await runJob({ command: { argv: ['true'] }, backend: { kind: 'microvm' } }, { runtime });
    assert.equal(result.status, 'backend_unavailable');
    assert.equal(result.error?.code, 'backend.unavailable');
    assert.match(result.error!.message, /microvm/);
    assert.equal(result.exit_code, null, 'nothing ran');
    assert.deepEqual(result.backend, { kind: 'microvm' });
  });

  it('aliases resolve to their kind: bubblewrap runs on local_process', async () => {
    const result = await runJob({ command: { argv: ['true'] }, backend: { kind: 'bubblewrap' } }, { runtime });
    assert.equal(result.status, 'completed');
    assert.deepEqual(result.backend, { kind: 'local_process' });
  });

  it('snippets and tasks take the same choice', async () => {
    const snippet = await executeSnippet({ lang: 'python', code: 'print(1)', backend: { kind: 'firecracker' } }, { runtime });
    assert.equal(snippet.exit_code, 126);
    assert.match(snippet.error, /microvm backend is not available/);
    const task = await runTask({ lang: 'python', code: 'return _items', mode: 'all_items', items: [], backend: { kind: 'microvm' } }, { runtime });
    assert.ok('error_code' in task && task.error_code === 'backend.unavailable', JSON.stringify(task));
  });

  it('the CLIs take --backend KIND', async () => {
    const exec = await runCli('agent-runner', ['exec', '--backend', 'microvm', '--lang', 'python', '--code', 'print(1)']);
    assert.equal(exec.code, 126);
    const gvisor = (await runtime.backends.describe()).find((backend) => backend.kind === 'gvisor')!;
    const onGvisor = await runCli('agent-runner', ['exec', '--backend', 'gvisor', '--lang', 'python', '--code', 'print(6*7)']);
    if (gvisor.available) assert.equal(JSON.parse(onGvisor.stdout).stdout, '42\n');
    else assert.match(JSON.parse(onGvisor.stdout).error, /gvisor/);
    const run = await runCli('agent-runner', ['run', '--backend', 'microvm', '--', 'true']);
    assert.equal(run.code, 1);
    assert.equal(JSON.parse(run.stdout).status, 'backend_unavailable');
  });

  describe('agent-exec --backend', () => {
    const { root, cwd } = jobDirs('agent-exec-backend');

    it('refuses a kind that cannot build its sandbox, with the reason, and runs nothing', async () => {
      const { code, response } = await agentExec(root, ['run', '--cwd', cwd, '--backend', 'gvisor', '--', 'true']);
      assert.equal(code, 1);
      assert.equal(response.error.code, 'sandbox_unavailable');
      assert.match(response.error.message, /gvisor/);
      const unknown = await agentExec(root, ['run', '--cwd', cwd, '--backend', 'nope', '--', 'true']);
      assert.equal(unknown.code, 2);
      assert.equal(unknown.response.error.code, 'invalid_argument');
    });
  });
});
