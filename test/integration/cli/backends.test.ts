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
    assert.deepEqual(Object.keys(local.capabilities).sort(), ['host_work_dir', 'memory', 'network', 'pause', 'profiles', 'root_inside', 'snapshot', 'volumes']);
    assert.deepEqual(
      backends.map((backend) => backend.capabilities.pause),
      ['memory', 'memory', 'memory'],
      "every backend keeps a paused sandbox's processes' memory with its files (CRIU, which setup-host builds; runsc checkpoint; QEMU's migration to a file)",
    );
    assert.ok(
      local.notes.some((note) => /^CRIU at \S+: long-lived sandboxes without egress pause, fork and snapshot with their processes' memory$/.test(note)),
      `local_process says what keeps their memory: ${local.notes.join('; ')}`,
    );
    assert.deepEqual(
      backends.map((backend) => backend.capabilities.network),
      [
        ['none', 'egress', 'proxy', 'host'],
        ['none', 'proxy'],
        ['none', 'proxy'],
      ],
      'egress by name (allow_domains, secrets) on every backend; pasta and the host network on local_process only',
    );
    const gvisor = backends[1]!;
    // Available where runsc runs (this host), otherwise with the probe's reason.
    assert.match(gvisor.notes[0]!, gvisor.available ? /^runsc \S+, platform / : /runsc/);
    assert.deepEqual(gvisor.capabilities.profiles, ['snippet', 'task', 'run-job']);
    const microvm = backends[2]!;
    assert.deepEqual(microvm.aliases, ['firecracker']);
    // Available where QEMU boots the guest (this host, after scripts/setup-host.sh), saying under which accelerator.
    assert.match(microvm.notes[0]!, microvm.available ? /^QEMU -M microvm under (KVM|TCG)/ : /QEMU|kernel|guest/);
    assert.equal(microvm.capabilities.host_work_dir, false);
  });

  const runtime = testRuntime();
  after(() => runtime.dispose());

  it("a run job its kind cannot run ends backend_unavailable with the backend's reason, never elsewhere", async () => {
    // A microVM reaches the network by name only (its egress proxy): a job allowed the network is refused, not run on local_process.
    const result = await runJob({ command: { argv: ['true'] }, policy: { network: 'allow' }, backend: { kind: 'microvm' } }, { runtime });
    assert.equal(result.status, 'backend_unavailable');
    assert.equal(result.error?.code, 'backend.unavailable');
    assert.match(result.error!.message, /microvm|network/);
    assert.equal(result.exit_code, null, 'nothing ran');
    assert.deepEqual(result.backend, { kind: 'microvm' });
  });

  it('a kind no backend has ends backend_unavailable / backend.unavailable naming the known kinds, on the library and the CLI, and runs nothing', async () => {
    const result = await runJob({ command: { argv: ['true'] }, backend: { kind: 'nope' } }, { runtime });
    assert.equal(result.status, 'backend_unavailable', JSON.stringify(result.error));
    assert.equal(result.error?.code, 'backend.unavailable');
    assert.match(result.error!.message, /unknown backend kind "nope"; known kinds: local_process, gvisor, microvm/);
    assert.equal(result.exit_code, null, 'nothing ran');
    assert.deepEqual(result.backend, { kind: 'nope' });
    const snippet = await executeSnippet({ lang: 'python', code: 'print(1)', backend: { kind: 'nope' } }, { runtime });
    assert.equal(snippet.exit_code, 126, JSON.stringify(snippet));
    assert.match(snippet.error, /^sandbox unavailable: unknown backend kind "nope"/);
    const run = await runCli('agent-runner', ['run', '--backend', 'nope', '--', 'true']);
    assert.equal(run.code, 1, run.stdout);
    assert.equal(JSON.parse(run.stdout).status, 'backend_unavailable');
  });

  it('aliases resolve to their kind: bubblewrap runs on local_process', async () => {
    const result = await runJob({ command: { argv: ['true'] }, backend: { kind: 'bubblewrap' } }, { runtime });
    assert.equal(result.status, 'completed');
    assert.deepEqual(result.backend, { kind: 'local_process' });
  });

  it('snippets and tasks take the same choice', async () => {
    const snippet = await executeSnippet({ lang: 'python', code: 'import os\nprint(os.uname().nodename)', backend: { kind: 'firecracker' } }, { runtime });
    assert.equal(snippet.stdout, 'sandbox\n', JSON.stringify(snippet));
    const task = await runTask(
      { lang: 'python', code: 'return [{"n": len(_items)}]', mode: 'all_items', items: [{ json: { a: 1 } }, { json: { a: 2 } }], backend: { kind: 'microvm' } },
      { runtime },
    );
    assert.ok(!('error_code' in task), JSON.stringify(task));
  });

  it('the CLIs take --backend KIND', async () => {
    const exec = await runCli('agent-runner', ['exec', '--backend', 'microvm', '--lang', 'python', '--code', 'print(6*7)']);
    assert.equal(exec.code, 0, exec.stdout);
    assert.equal(JSON.parse(exec.stdout).stdout, '42\n');
    const gvisor = (await runtime.backends.describe()).find((backend) => backend.kind === 'gvisor')!;
    const onGvisor = await runCli('agent-runner', ['exec', '--backend', 'gvisor', '--lang', 'python', '--code', 'print(6*7)']);
    if (gvisor.available) assert.equal(JSON.parse(onGvisor.stdout).stdout, '42\n');
    else assert.match(JSON.parse(onGvisor.stdout).error, /gvisor/);
    const run = await runCli('agent-runner', ['run', '--backend', 'firecracker', '--', 'true']);
    assert.equal(run.code, 0, run.stdout);
    assert.equal(JSON.parse(run.stdout).status, 'completed');
    const refused = await runCli('agent-runner', ['run', '--backend', 'gvisor', '--network', 'allow', '--', 'true']);
    assert.equal(refused.code, 1);
    assert.equal(JSON.parse(refused.stdout).status, 'backend_unavailable');
  });

  describe('agent-exec --backend', () => {
    const { root, cwd } = jobDirs('agent-exec-backend');

    it('refuses a kind that cannot build its sandbox, with the reason, and runs nothing', async () => {
      const { code, response } = await agentExec(root, ['run', '--cwd', cwd, '--backend', 'gvisor', '--', 'true']);
      assert.equal(code, 1);
      assert.equal(response.error.code, 'sandbox_unavailable');
      assert.match(response.error.message, /gvisor/);
      const unknown = await agentExec(root, ['run', '--cwd', cwd, '--backend', 'nope', '--', 'true']);
      assert.equal(unknown.code, 1);
      assert.equal(unknown.response.error.code, 'sandbox_unavailable');
      assert.match(unknown.response.error.message, /unknown backend kind "nope"; known kinds: local_process/);
    });
  });
});
