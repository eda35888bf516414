import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { AgentRunnerClient } from '../../../src/client/client.js';
import { AgentRunnerError } from '../../../src/client/types.js';
import { runCli } from '../../helpers/cli.js';
import { hostProcessesMatching } from '../../helpers/processes.js';
import { processEnv } from '../../helpers/runtime.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from '../../helpers/timeouts.js';

/**
 * Our own faces of long-lived sandboxes, on local_process: /v1/sandboxes through the typed
 * client, `agent-runner sandbox` against a running serve, and the MCP sandbox tools of
 * `agent-runner mcp` (whose process hosts its own sandboxes). E2B's faces of the same
 * sandboxes: test/integration/e2b/sdk.test.ts.
 */
describe('sandboxes through the client, the CLI and MCP', () => {
  let server: ServerProcess;
  let client: AgentRunnerClient;
  let keptDir: string;
  const made: string[] = [];

  before(async () => {
    keptDir = mkdtempSync(join(tmpdir(), 'kept-'));
    server = await startServer([], { env: { AGENT_RUNNER_SANDBOXES__KEPT_DIR: keptDir } });
    client = new AgentRunnerClient({ url: server.url, token: server.token! });
  });
  after(async () => {
    await Promise.all(made.map((id) => client.killSandbox(id).catch(() => undefined)));
    await server.stop();
    rmSync(keptDir, { recursive: true, force: true });
  });

  it('the client creates, runs in, moves files in and out of, and kills a sandbox; a timeout kills the whole tree', async () => {
    const sandbox = await client.createSandbox({ env_vars: { GREETING: 'hello' }, metadata: { suite: 'faces' } });
    made.push(sandbox.id);
    assert.equal(sandbox.state, 'running');
    assert.ok((await client.listSandboxes()).some((listed) => listed.id === sandbox.id));

    const shell = await client.sandboxExec(sandbox.id, { cmd: 'echo "$GREETING $PWD $EXTRA"; read line; echo "got $line" >&2; exit 3', envs: { EXTRA: 'x' }, stdin: 'in\n' });
    assert.deepEqual({ ...shell, duration_ms: 0 }, { sandbox_id: sandbox.id, stdout: 'hello /home/user x\n', stderr: 'got in\n', exit_code: 3, timed_out: false, duration_ms: 0 });
    const missing = await client.sandboxExec(sandbox.id, { argv: ['no-such-program-here'] });
    assert.equal(missing.exit_code, 127);

    const bytes = randomBytes(3 * 1024 * 1024 + 17);
    assert.deepEqual(await client.sandboxWriteFile(sandbox.id, 'data/blob.bin', bytes), { path: '/home/user/data/blob.bin', bytes: bytes.length });
    assert.ok((await client.sandboxReadFile(sandbox.id, '/home/user/data/blob.bin')).equals(bytes), 'the bytes come back as they went in');
    const sum = await client.sandboxExec(sandbox.id, { argv: ['sha256sum', 'data/blob.bin'] });
    assert.equal(sum.stdout.split(' ')[0], createHash('sha256').update(bytes).digest('hex'));
    await assert.rejects(client.sandboxReadFile(sandbox.id, 'nope.txt'), (error: unknown) => error instanceof AgentRunnerError && error.code === 'sandbox.file_not_found');
    await assert.rejects(client.sandboxReadFile(sandbox.id, 'data'), (error: unknown) => error instanceof AgentRunnerError && error.code === 'sandbox.file_not_regular');

    const marker = `sleep ${3000 + Math.floor(Math.random() * 900)}`;
    const timedOut = await client.sandboxExec(sandbox.id, { argv: ['sh', '-c', `${marker} & ${marker}1`], timeout: 1 });
    assert.equal(timedOut.exit_code, 124);
    assert.equal(timedOut.timed_out, true);
    const ps = await client.sandboxExec(sandbox.id, { cmd: 'ps -eo args' });
    assert.equal(ps.exit_code, 0, ps.stderr);
    assert.ok(!ps.stdout.includes(marker), ps.stdout);
    assert.deepEqual(hostProcessesMatching(marker), []);

    const extended = await client.setSandboxTimeout(sandbox.id, 900);
    assert.ok(Date.parse(extended.end_at) > Date.now() + 800_000);
    const killed = await client.killSandbox(sandbox.id);
    assert.equal(killed.state, 'ended');
    assert.equal((await client.getSandbox(sandbox.id)).state, 'ended');
    await assert.rejects(client.sandboxExec(sandbox.id, { argv: ['true'] }), (error: unknown) => error instanceof AgentRunnerError && error.code === 'sandbox.ended');
  });

  it('the client runs cells in a sandbox’s code interpreter: state, a DataFrame, a chart, an error, a timeout that keeps the state', async () => {
    const sandbox = await client.createSandbox({});
    made.push(sandbox.id);
    // The kernel's start and the imports count against the first cells' timeouts: not the
    // subject; a loaded CI machine needs room.
    const first = await client.sandboxRunCode(sandbox.id, {
      code: 'import pandas as pd\nframe = pd.DataFrame({"n": [1, 2]})\nprint("made")\nframe',
      timeout: NOT_THE_SUBJECT_TIMEOUT_S,
    });
    assert.equal(first.stdout, 'made\n');
    assert.equal(first.error, null);
    assert.equal(first.results.length, 1);
    assert.match(first.results[0]!.html!, /<table/);
    assert.deepEqual(first.results[0]!.data, { n: [1, 2] });
    const chart = await client.sandboxRunCode(sandbox.id, {
      code: 'import matplotlib.pyplot as plt\nplt.scatter(frame["n"], [3, 4])\nplt.show()',
      timeout: NOT_THE_SUBJECT_TIMEOUT_S,
    });
    assert.equal((chart.results[0]!.chart as { type: string }).type, 'scatter');
    assert.ok(Buffer.from(chart.results[0]!.png!, 'base64').subarray(1, 4).equals(Buffer.from('PNG')));
    const failed = await client.sandboxRunCode(sandbox.id, { code: 'frame["missing"]' });
    assert.equal(failed.error?.name, 'KeyError');
    const slow = await client.sandboxRunCode(sandbox.id, { code: 'import time\ntime.sleep(60)', timeout: 1 });
    assert.equal(slow.timed_out, true);
    assert.equal(slow.error?.name, 'KeyboardInterrupt');
    assert.equal((await client.sandboxRunCode(sandbox.id, { code: 'len(frame)' })).results[0]!.text, '2');
    await assert.rejects(
      client.sandboxRunCode(sandbox.id, { code: '1', context_id: 'nope' }),
      (error: unknown) => error instanceof AgentRunnerError && error.code === 'sandbox.context_not_found',
    );
  });

  it('agent-runner sandbox create, exec (a failing command exits 1), put, get and kill', async () => {
    const flags = ['--server', server.url, '--token', server.token!];
    const created = await runCli('agent-runner', ['sandbox', 'create', '--timeout', '120', '-m', 'via=cli', ...flags]);
    assert.equal(created.code, 0, created.stderr);
    const { id, metadata } = JSON.parse(created.stdout) as { id: string; metadata: Record<string, string> };
    made.push(id);
    assert.deepEqual(metadata, { via: 'cli' });

    const put = await runCli('agent-runner', ['sandbox', 'put', id, 'notes.txt', ...flags], { stdin: 'from stdin\n' });
    assert.equal(put.code, 0, put.stderr);
    assert.deepEqual(JSON.parse(put.stdout), { path: '/home/user/notes.txt', bytes: 11 });
    const failing = await runCli('agent-runner', ['sandbox', 'exec', id, ...flags, '--', 'sh', '-c', 'cat notes.txt; exit 5']);
    assert.equal(failing.code, 1);
    assert.equal(JSON.parse(failing.stdout).exit_code, 5);
    assert.equal(JSON.parse(failing.stdout).stdout, 'from stdin\n');
    const shell = await runCli('agent-runner', ['sandbox', 'exec', id, '--cmd', 'tr a-z A-Z < notes.txt > upper.txt', ...flags]);
    assert.equal(shell.code, 0, shell.stdout);
    const root = await runCli('agent-runner', ['sandbox', 'exec', id, '--user', 'root', ...flags, '--', 'id', '-un']);
    assert.equal(JSON.parse(root.stdout).stdout, 'root\n', root.stderr);
    const got = await runCli('agent-runner', ['sandbox', 'get', id, 'upper.txt', ...flags]);
    assert.equal(got.code, 0, got.stderr);
    assert.equal(got.stdout, 'FROM STDIN\n');
    const listed = await runCli('agent-runner', ['sandbox', 'list', ...flags]);
    assert.ok((JSON.parse(listed.stdout) as { sandboxes: Array<{ id: string }> }).sandboxes.some((sandbox) => sandbox.id === id));
    const killed = await runCli('agent-runner', ['sandbox', 'kill', id, ...flags]);
    assert.equal(killed.code, 0, killed.stderr);
    assert.equal(JSON.parse(killed.stdout).state, 'ended');
    const afterKill = await runCli('agent-runner', ['sandbox', 'get', id, 'upper.txt', ...flags]);
    assert.equal(afterKill.code, 1);
    assert.equal(JSON.parse(afterKill.stdout).error.code, 'sandbox.ended');
  });

  it('the client and agent-runner sandbox pause, resume, fork and snapshot a sandbox', async () => {
    const flags = ['--server', server.url, '--token', server.token!];
    const sandbox = await client.createSandbox({ metadata: { suite: 'faces-pause' } });
    made.push(sandbox.id);
    await client.sandboxWriteFile(sandbox.id, 'kept.txt', 'across the pause');
    const paused = await runCli('agent-runner', ['sandbox', 'pause', sandbox.id, ...flags]);
    assert.equal(paused.code, 0, paused.stderr);
    assert.deepEqual([JSON.parse(paused.stdout).state, JSON.parse(paused.stdout).kept], ['paused', 'memory']);
    const memory = await runCli('agent-runner', ['sandbox', 'pause', sandbox.id, '--memory', ...flags]);
    assert.equal(JSON.parse(memory.stdout).error.code, 'sandbox.paused');
    assert.equal((await client.resumeSandbox(sandbox.id, 120)).state, 'running');
    assert.equal((await client.sandboxReadFile(sandbox.id, 'kept.txt')).toString(), 'across the pause');

    const forked = await runCli('agent-runner', ['sandbox', 'fork', sandbox.id, '--count', '2', ...flags]);
    assert.equal(forked.code, 0, forked.stderr);
    const copies = (JSON.parse(forked.stdout) as { forks: Array<{ sandbox: { id: string } }> }).forks.map((fork) => fork.sandbox.id);
    made.push(...copies);
    assert.equal(copies.length, 2);
    for (const copy of copies) assert.equal((await client.sandboxReadFile(copy, 'kept.txt')).toString(), 'across the pause');

    const snapshot = await client.snapshotSandbox(sandbox.id, { name: `faces-${randomBytes(3).toString('hex')}` });
    const listed = await runCli('agent-runner', ['sandbox', 'snapshots', ...flags]);
    assert.ok((JSON.parse(listed.stdout) as { snapshots: Array<{ id: string }> }).snapshots.some((kept) => kept.id === snapshot.id));
    const fromSnapshot = await client.createSandbox({ template: snapshot.name! });
    made.push(fromSnapshot.id);
    assert.equal((await client.sandboxReadFile(fromSnapshot.id, 'kept.txt')).toString(), 'across the pause');
    const deleted = await runCli('agent-runner', ['sandbox', 'delete-snapshot', snapshot.id, ...flags]);
    assert.equal(deleted.code, 0, deleted.stderr);
    await assert.rejects(client.deleteSnapshot(snapshot.id), (error: unknown) => error instanceof AgentRunnerError && error.code === 'snapshot.not_found');
  });

  it('the MCP tools make, use, list and kill a sandbox of the MCP process', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [fileURLToPath(new URL('../../../dist/cli/agent-runner.js', import.meta.url)), 'mcp'],
      env: processEnv() as Record<string, string>,
      stderr: 'pipe',
    });
    const mcp = new Client({ name: 'agent-runner-test', version: '0.0.0' });
    await mcp.connect(transport);
    try {
      const call = async (name: string, args: Record<string, unknown>) => {
        const result = await mcp.callTool({ name, arguments: args });
        assert.equal(result.isError, undefined, JSON.stringify(result));
        return result.structuredContent as Record<string, any>;
      };
      const { id } = await call('sandbox_create', { timeout_seconds: 120 });
      assert.deepEqual(await call('sandbox_write_file', { sandbox_id: id, path: 'in/a.txt', content: 'forty-one' }), { path: '/home/user/in/a.txt', bytes: 9 });
      const ran = await call('sandbox_exec', { sandbox_id: id, cmd: 'sed s/one/two/ in/a.txt > out.txt; printf "\\001\\002" > out.bin; cat out.txt; exit 2' });
      assert.equal(ran.exit_code, 2);
      assert.equal(ran.stdout, 'forty-two');
      assert.equal((await call('sandbox_read_file', { sandbox_id: id, path: '/home/user/out.txt' })).content, 'forty-two');
      assert.deepEqual(await call('sandbox_read_file', { sandbox_id: id, path: 'out.bin', encoding: 'base64' }), {
        path: 'out.bin',
        encoding: 'base64',
        content: 'AQI=',
        bytes: 2,
      });
      // A tree in one call each way, between this machine and the sandbox.
      const local = mkdtempSync(join(tmpdir(), 'mcp-sync-'));
      try {
        mkdirSync(join(local, 'in', 'sub'), { recursive: true });
        writeFileSync(join(local, 'in', 'sub', 'b.txt'), 'synced');
        const pushed = await call('sandbox_sync', { sandbox_id: id, direction: 'push', local_path: join(local, 'in'), path: 'tree' });
        assert.deepEqual({ files: pushed.files, complete: pushed.complete }, { files: 1, complete: true });
        const pulled = await call('sandbox_sync', { sandbox_id: id, direction: 'pull', local_path: join(local, 'out'), path: 'tree' });
        assert.equal(pulled.files, 1);
        assert.equal(readFileSync(join(local, 'out', 'sub', 'b.txt'), 'utf8'), 'synced');
      } finally {
        rmSync(local, { recursive: true, force: true });
      }
      // A chart a cell draws is image content: what a model sees.
      const drawn = await mcp.callTool({
        name: 'sandbox_run_code',
        arguments: { sandbox_id: id, code: 'import matplotlib.pyplot as plt\nplt.bar(["a", "b"], [1, 2])\nplt.show()' },
      });
      const content = drawn.content as Array<{ type: string; mimeType?: string; data?: string; text?: string }>;
      assert.deepEqual(
        content.map((item) => [item.type, item.mimeType]),
        [
          ['text', undefined],
          ['image', 'image/png'],
        ],
      );
      assert.match(content[0]!.text!, /result 1 \(a bar chart\)/);
      assert.ok(Buffer.from(content[1]!.data!, 'base64').subarray(1, 4).equals(Buffer.from('PNG')));
      const both = await mcp.callTool({ name: 'sandbox_exec', arguments: { sandbox_id: id, cmd: 'true', argv: ['true'] } });
      assert.equal(both.isError, true);
      assert.equal((both.structuredContent as { error: { code: string } }).error.code, 'validation.invalid_request');
      assert.deepEqual(
        (await call('sandbox_list', {})).sandboxes.map((sandbox: { id: string; state: string }) => [sandbox.id, sandbox.state]),
        [[id, 'running']],
      );
      assert.deepEqual([(await call('sandbox_pause', { sandbox_id: id })).state, (await call('sandbox_list', {})).sandboxes[0].state], ['paused', 'paused']);
      assert.equal((await call('sandbox_resume', { sandbox_id: id })).state, 'running');
      const [copy] = (await call('sandbox_fork', { sandbox_id: id })).forks as Array<{ sandbox: { id: string } }>;
      assert.equal((await call('sandbox_read_file', { sandbox_id: copy!.sandbox.id, path: 'out.bin', encoding: 'base64' })).content, 'AQI=');
      assert.equal((await call('sandbox_kill', { sandbox_id: copy!.sandbox.id })).state, 'ended');
      assert.equal((await call('sandbox_kill', { sandbox_id: id })).state, 'ended');
      const gone = await mcp.callTool({ name: 'sandbox_exec', arguments: { sandbox_id: id, argv: ['true'] } });
      assert.equal((gone.structuredContent as { error: { code: string } }).error.code, 'sandbox.ended');
    } finally {
      await mcp.close();
    }
  });
});
