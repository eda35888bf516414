import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { RunJobResult } from '../../../src/contract/run-job.js';
import { RunJobResultSchema } from '../../../src/contract/run-job.js';
import { validate } from '../../../src/contract/validate.js';
import { runJob } from '../../../src/runner/run-job.js';
import { testRuntime } from '../../helpers/runtime.js';
import { makeWorkspace } from '../../helpers/workspace.js';

const runtime = testRuntime();
after(() => runtime.dispose());

async function run(request: unknown): Promise<RunJobResult> {
  const result = await runJob(request, { runtime });
  const checked = validate(RunJobResultSchema, result);
  assert.ok(checked.ok, `result must match its schema: ${!checked.ok && checked.message}`);
  return result;
}

const workspace = (path: string) => ({ source: 'local_path' as const, path });

describe('run jobs', () => {
  it('runs a command in a snapshot of the workspace and collects artifacts', async () => {
    const path = makeWorkspace({
      'main.py': 'import os\nos.makedirs("out", exist_ok=True)\nopen("out/report.txt","w").write("done")\nprint(sorted(os.listdir(".")))\n',
      '.env': 'SECRET=1',
    });
    const result = await run({ workspace: workspace(path), command: { argv: ['python3', 'main.py'] }, artifacts: ['out/**'], trace: { trace_id: 'tr-run-1', custom: 7 } });
    assert.equal(result.status, 'completed', JSON.stringify(result.error));
    assert.equal(result.exit_code, 0);
    assert.equal(result.stdout.text, "['main.py', 'out']\n");
    assert.deepEqual(result.trace, { trace_id: 'tr-run-1', custom: 7 });
    assert.match(result.job_id, /^job_[0-9a-f-]{36}$/);
    assert.equal(result.artifacts.length, 1);
    const [artifact] = result.artifacts;
    assert.equal(artifact!.path, 'out/report.txt');
    assert.equal(artifact!.size, 4);
    assert.equal(artifact!.sha256, createHash('sha256').update('done').digest('hex'));
    assert.equal(readFileSync(fileURLToPath(artifact!.uri), 'utf8'), 'done');
    assert.equal(result.policy.decision, 'allowed');
    assert.equal(existsSync(join(path, 'out')), false, 'the source workspace is never written');
  });

  it('rejects a cwd that leaves the snapshot with validation.path_escape', async () => {
    const result = await run({ command: { argv: ['ls'], cwd: '../..' } });
    assert.equal(result.status, 'failed');
    assert.equal(result.error?.code, 'validation.path_escape');
  });

  it('rejects an invalid job id and limits over the ceiling, naming the field', async () => {
    const badId = await run({ job_id: '../etc', command: { argv: ['true'] } });
    assert.equal(badId.error?.code, 'validation.invalid_request');
    assert.match(badId.error!.message, /job_id must match/);
    const tooLong = await run({ command: { argv: ['true'] }, limits: { timeout_ms: 10 * 60 * 60 * 1000 } });
    assert.equal(tooLong.error?.code, 'validation.invalid_request');
    assert.match(tooLong.error!.message, /limits\.timeout_ms must be at most/);
    const empty = await run({ command: { argv: [] } });
    assert.match(empty.error!.message, /command\.argv must have at least 1 item/);
  });

  it('denies a command not in allowed_commands', async () => {
    const result = await run({ command: { argv: ['ls'] }, policy: { allowed_commands: ['python3'] } });
    assert.equal(result.status, 'policy_denied');
    assert.equal(result.error?.code, 'policy.command_denied');
    assert.deepEqual(result.error?.details, { argv0: 'ls' });
    assert.equal(result.policy.decision, 'denied');
  });

  it('denies shells and inline interpreter code unless allow_shell', async () => {
    for (const argv of [
      ['bash', '-c', 'id'],
      ['/bin/sh', 'x.sh'],
      ['python3', '-c', 'print(1)'],
      ['env', 'FOO=1', 'sh', '-c', 'id'],
      ['node', '-e', '1'],
    ]) {
      const result = await run({ command: { argv } });
      assert.equal(result.status, 'policy_denied', argv.join(' '));
      assert.equal(result.error?.code, 'policy.shell_denied');
    }
    const allowed = await run({ command: { argv: ['bash', '-c', 'echo shell ok'] }, policy: { allow_shell: true } });
    assert.equal(allowed.stdout.text, 'shell ok\n');
  });

  it('denies request env keys that allowed_env does not list', async () => {
    const denied = await run({ command: { argv: ['printenv', 'GREETING'], env: { GREETING: 'hi' } } });
    assert.equal(denied.status, 'policy_denied');
    assert.equal(denied.error?.code, 'policy.env_denied');
    const allowed = await run({ command: { argv: ['printenv', 'GREETING'], env: { GREETING: 'hi' } }, policy: { allowed_env: ['GREETING'] } });
    assert.equal(allowed.stdout.text, 'hi\n');
  });

  it('pins a command by path and sha256: a different binary is denied', async () => {
    const real = createHash('sha256').update(readFileSync('/usr/bin/true')).digest('hex');
    const pinned = await run({ command: { argv: ['true'] }, policy: { allowed_commands: [{ basename: 'true', path: '/usr/bin/true', sha256: real }] } });
    assert.equal(pinned.status, 'completed');
    assert.match(pinned.policy.rule, /pinned/);
    const mismatch = await run({ command: { argv: ['true'] }, policy: { allowed_commands: [{ basename: 'true', sha256: '0'.repeat(64) }] } });
    assert.equal(mismatch.status, 'policy_denied');
    assert.equal(mismatch.error?.code, 'policy.command_denied');
    const otherPath = await run({ command: { argv: ['true'] }, policy: { allowed_commands: [{ basename: 'true', path: '/usr/bin/false' }] } });
    assert.equal(otherPath.status, 'policy_denied');
  });

  it('truncates output past the cap while the hash covers the whole stream', async () => {
    const path = makeWorkspace({ 'big.py': 'import sys\nsys.stdout.write("0123456789" * 100000)\n' });
    const result = await run({ workspace: workspace(path), command: { argv: ['python3', 'big.py'] }, limits: { max_stdout_bytes: 1000 } });
    const full = '0123456789'.repeat(100000);
    assert.equal(result.stdout.truncated, true);
    assert.equal(result.stdout.observed_bytes, full.length);
    assert.equal(result.stdout.text, full.slice(0, 1000));
    assert.equal(result.stdout.sha256, createHash('sha256').update(full).digest('hex'));
  });

  it('gives stable replay hashes, and a new workspace hash when one file changes', async () => {
    const files = { 'main.py': 'print("replay")\n', 'data.txt': 'v1' };
    const request = (path: string) => ({ workspace: workspace(path), command: { argv: ['python3', 'main.py'] } });
    const path = makeWorkspace(files);
    const first = await run(request(path));
    const second = await run(request(path));
    assert.equal(first.replay.request_sha256, second.replay.request_sha256);
    assert.equal(first.replay.workspace_sha256, second.replay.workspace_sha256);
    assert.equal(first.replay.result_sha256, second.replay.result_sha256);
    writeFileSync(join(path, 'data.txt'), 'v2');
    const third = await run(request(path));
    assert.equal(third.replay.request_sha256, first.replay.request_sha256);
    assert.notEqual(third.replay.workspace_sha256, first.replay.workspace_sha256);
  });

  it('collects at most max_artifacts and reports the rest as policy.artifact_denied', async () => {
    const path = makeWorkspace({ 'make.py': 'for i in range(10):\n    open(f"a{i}.out", "w").write("x" * 10)\n' });
    const result = await run({ workspace: workspace(path), command: { argv: ['python3', 'make.py'] }, artifacts: ['*.out'], limits: { max_artifacts: 3 } });
    assert.equal(result.status, 'completed');
    assert.deepEqual(
      result.artifacts.map((artifact) => artifact.path),
      ['a0.out', 'a1.out', 'a2.out'],
    );
    assert.equal(result.error?.code, 'policy.artifact_denied');
    assert.equal((result.error?.details?.denied as unknown[]).length, 7);
  });

  it('never follows a symlink the job plants, in artifact collection', async () => {
    const path = makeWorkspace({ 'plant.py': 'import os\nos.symlink("/etc/passwd", "leak.txt")\nos.symlink("/etc", "etcdir")\nopen("ok.txt","w").write("ok")\n' });
    const result = await run({ workspace: workspace(path), command: { argv: ['python3', 'plant.py'] }, artifacts: ['*.txt', 'etcdir/**'] });
    assert.equal(result.status, 'completed', JSON.stringify(result.error));
    assert.deepEqual(
      result.artifacts.map((artifact) => artifact.path),
      ['ok.txt'],
    );
  });

  it('keeps the host environment away from the child', async () => {
    const secret = `secret-${randomUUID()}`;
    process.env.AGENT_RUNNER_TEST_SECRET = secret;
    try {
      const result = await run({ command: { argv: ['env'] } });
      assert.equal(result.status, 'completed');
      assert.ok(!result.stdout.text.includes(secret));
      assert.ok(!result.stdout.text.includes('AGENT_RUNNER_TEST_SECRET'));
    } finally {
      delete process.env.AGENT_RUNNER_TEST_SECRET;
    }
  });

  it('times out, kills the tree, and says so', async () => {
    const result = await run({ command: { argv: ['sleep', '3600'] }, limits: { timeout_ms: 500 } });
    assert.equal(result.status, 'timed_out');
    assert.equal(result.error?.code, 'run.timed_out');
    assert.equal(result.signal, 'SIGKILL');
    // Far below the job's hour, whatever the load: it did not wait for the job.
    assert.ok(result.duration_ms < 600_000, `took ${result.duration_ms} ms`);
  });

  it('reports a non-zero exit, a missing command, an out-of-memory kill and a backend that cannot run it distinctly', async () => {
    const nonzero = await run({ command: { argv: ['false'] } });
    assert.equal(nonzero.status, 'failed');
    assert.equal(nonzero.error?.code, 'run.exit_nonzero');
    assert.equal(nonzero.exit_code, 1);
    const missing = await run({ command: { argv: ['no-such-command-here'] } });
    assert.equal(missing.error?.code, 'run.spawn_failed');
    const path = makeWorkspace({ 'hog.py': 'blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))\n' });
    const oom = await run({ workspace: workspace(path), command: { argv: ['python3', 'hog.py'] }, limits: { memory_bytes: 128 * 1024 * 1024 } });
    assert.equal(oom.status, 'failed');
    assert.equal(oom.error?.code, 'run.out_of_memory');
    const firecracker = await run({ command: { argv: ['true'] }, policy: { network: 'allow' }, backend: { kind: 'firecracker' } });
    assert.equal(firecracker.status, 'backend_unavailable');
    assert.equal(firecracker.error?.code, 'backend.unavailable');
  });

  it('shrinks kept output to fit max_record_bytes, never the hashes', async () => {
    const path = makeWorkspace({ 'out.py': 'print("y" * 50000)\n' });
    const result = await run({ workspace: workspace(path), command: { argv: ['python3', 'out.py'] }, limits: { max_record_bytes: 8000 } });
    assert.ok(Buffer.byteLength(JSON.stringify(result)) <= 8000);
    assert.equal(result.stdout.observed_bytes, 50001);
    assert.equal(result.stdout.truncated, true);
    assert.equal(
      result.stdout.sha256,
      createHash('sha256')
        .update(`${'y'.repeat(50000)}\n`)
        .digest('hex'),
    );
  });

  it('answers a missing workspace with setup_failed', async () => {
    const result = await run({ workspace: workspace('/nonexistent/workspace'), command: { argv: ['true'] } });
    assert.equal(result.status, 'setup_failed');
    assert.equal(result.error?.code, 'backend.setup_failed');
  });

  it('lets the job write into its snapshot (owned by the job uid) and runs in cwd', async () => {
    const path = makeWorkspace({ 'sub/existing.txt': 'old' });
    const result = await run({ workspace: workspace(path), command: { argv: ['sed', '-i', 's/old/new/', 'existing.txt'], cwd: 'sub' }, artifacts: ['sub/*.txt'] });
    assert.equal(result.status, 'completed', result.stderr.text);
    assert.equal(result.command.cwd, 'sub');
    assert.equal(readFileSync(fileURLToPath(result.artifacts[0]!.uri), 'utf8'), 'new');
  });
});

describe('run jobs, canceled', () => {
  let controller: AbortController;
  before(() => (controller = new AbortController()));
  it('cancels a running job through its signal', async () => {
    const pending = runJob({ command: { argv: ['sleep', '30'] } }, { runtime, signal: controller.signal, onRunning: () => setTimeout(() => controller.abort(), 100) });
    const result = await pending;
    assert.equal(result.status, 'canceled');
    assert.equal(result.error?.code, 'run.canceled');
  });
});

describe('run jobs, the library without a runtime', () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'run-job-own-runtime-'));
  // As any state dir: the sandboxes' uids read what the runtime puts in it.
  chmodSync(stateDir, 0o755);
  const previous = process.env.AGENT_RUNNER_STATE_DIR;
  before(() => (process.env.AGENT_RUNNER_STATE_DIR = stateDir));
  after(() => {
    if (previous === undefined) delete process.env.AGENT_RUNNER_STATE_DIR;
    else process.env.AGENT_RUNNER_STATE_DIR = previous;
    rmSync(stateDir, { recursive: true, force: true });
  });
  it("runs on a runtime made for the call from the environment's configuration, as README's example does", async () => {
    const result = await runJob({ command: { argv: ['echo', '42'] } });
    assert.equal(result.status, 'completed', JSON.stringify(result.error));
    assert.equal(result.stdout.text, '42\n');
    // Kept where that configuration's state dir says: the call ran on it, not on another runtime.
    assert.equal(JSON.parse(readFileSync(join(stateDir, 'runs', result.job_id, 'result.json'), 'utf8')).job_id, result.job_id);
  });
});
