import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { hostProcessesMatching } from '../../helpers/processes.js';
import { processEnv } from '../../helpers/runtime.js';
import { waitUntil } from '../../helpers/wait.js';
import { makeWorkspace } from '../../helpers/workspace.js';

const CLI = fileURLToPath(new URL('../../../dist/cli/agent-runner.js', import.meta.url));

/** The built CLI as an MCP client starts it: a child process spoken to over its stdio. */
async function startClient(args: string[]): Promise<{ client: Client; stderr: () => string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, ...args],
    env: processEnv() as Record<string, string>,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const client = new Client({ name: 'agent-runner-test', version: '0.0.0' });
  await client.connect(transport);
  return { client, stderr: () => stderr };
}

describe('agent-runner mcp', () => {
  let client: Client;
  let stderr: () => string;

  before(async () => {
    ({ client, stderr } = await startClient(['mcp']));
  });

  after(async () => {
    await client.close();
  });

  it('lists its tools with the contract schemas as their input schemas', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(
      tools.map((tool) => tool.name),
      [
        'run_snippet',
        'run_job',
        'session_create',
        'session_exec',
        'session_end',
        'sandbox_create',
        'sandbox_exec',
        'sandbox_run_code',
        'sandbox_write_file',
        'sandbox_sync',
        'sandbox_read_file',
        'sandbox_kill',
        'sandbox_pause',
        'sandbox_resume',
        'sandbox_fork',
        'sandbox_list',
        'template_list',
        'list_runtimes',
      ],
    );
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    assert.deepEqual(byName.get('run_snippet')!.inputSchema.required, ['lang', 'code']);
    assert.deepEqual(byName.get('run_job')!.inputSchema.required, ['command']);
    assert.equal(byName.get('list_runtimes')!.inputSchema.type, 'object');
    for (const tool of tools) {
      assert.ok(tool.description && tool.description.length > 40, tool.name);
      assert.equal(tool.outputSchema?.type, 'object', tool.name);
      assert.ok(!JSON.stringify(tool.inputSchema).includes('"$id"'), tool.name);
    }
  });

  it('run_snippet runs python and answers with the snippet response', async () => {
    const result = await client.callTool({ name: 'run_snippet', arguments: { lang: 'python', code: 'print(6*7)' } });
    assert.equal(result.isError, undefined, JSON.stringify(result));
    const { usage, trace_id, ...response } = result.structuredContent as Record<string, unknown>;
    assert.deepEqual(response, { stdout: '42\n', stderr: '', exit_code: 0, error: '' });
    assert.match(String(trace_id), /^tr-/);
    assert.ok((usage as { wall_ms: number }).wall_ms >= 0);
    assert.deepEqual(result.content, [{ type: 'text', text: 'exit_code: 0\n--- stdout\n42\n' }]);
  });

  it('a session keeps a python interpreter across session_exec calls until session_end', async () => {
    const created = await client.callTool({ name: 'session_create', arguments: { lang: 'python' } });
    assert.equal(created.isError, undefined, JSON.stringify(created));
    const { id } = created.structuredContent as { id: string };
    await client.callTool({ name: 'session_exec', arguments: { session_id: id, code: 'x = 41' } });
    const next = await client.callTool({ name: 'session_exec', arguments: { session_id: id, code: 'print(x + 1)\nx * 2' } });
    assert.deepEqual(next.structuredContent, { ...(next.structuredContent as object), stdout: '42\n', value: '82', exit_code: 0, session_ended: false });
    assert.deepEqual(next.content, [{ type: 'text', text: 'exit_code: 0\n--- value\n82\n--- stdout\n42\n' }]);
    // What a cell shows comes back too: a chart is image content, and a DataFrame its html and text.
    const drawn = await client.callTool({
      name: 'session_exec',
      arguments: { session_id: id, code: 'import matplotlib.pyplot as plt, pandas as pd\nplt.plot([1, 2, 3], [x, 2, 3])\nplt.show()\npd.DataFrame({"x": [x]})' },
    });
    const content = drawn.content as Array<{ type: string; mimeType?: string; data?: string; text?: string }>;
    assert.deepEqual(
      content.map((item) => [item.type, item.mimeType]),
      [
        ['text', undefined],
        ['image', 'image/png'],
      ],
    );
    assert.match(content[0]!.text!, /result 1 \(a line chart\): .*\[png, chart\]\nresult 2 \(the value\): [\s\S]*\[html, data\]/);
    assert.doesNotMatch(content[0]!.text!, /--- stderr/, 'a figure draws without complaint: fontconfig finds its configuration');
    assert.ok(Buffer.from(content[1]!.data!, 'base64').subarray(1, 4).equals(Buffer.from('PNG')));
    const { results, value } = drawn.structuredContent as { results: Array<{ chart?: { elements: Array<{ points: number[][] }> } }>; value: string };
    assert.deepEqual(results[0]!.chart!.elements[0]!.points, [
      [1, 41],
      [2, 2],
      [3, 3],
    ]);
    assert.match(value, /^\s+x\n0\s+41$/);
    const both = await client.callTool({ name: 'session_exec', arguments: { session_id: id, code: '1', argv: ['ls'] } });
    assert.equal((both.structuredContent as { error: { code: string } }).error.code, 'validation.invalid_request');
    const ended = await client.callTool({ name: 'session_end', arguments: { session_id: id } });
    assert.equal((ended.structuredContent as { state: string }).state, 'ended');
    const after = await client.callTool({ name: 'session_exec', arguments: { session_id: id, code: 'x' } });
    assert.equal(after.isError, true);
    assert.equal((after.structuredContent as { error: { code: string } }).error.code, 'session.ended');
  });

  it('run_snippet answers a program that fails as a normal result', async () => {
    const result = await client.callTool({ name: 'run_snippet', arguments: { lang: 'bash', code: 'echo oops >&2; exit 3' } });
    assert.equal(result.isError, undefined);
    assert.equal((result.structuredContent as { exit_code: number }).exit_code, 3);
    assert.equal((result.structuredContent as { stderr: string }).stderr, 'oops\n');
  });

  it('run_job runs a command and answers with the RunJobResult', async () => {
    const result = await client.callTool({ name: 'run_job', arguments: { command: { argv: ['python3', '-c', 'print(1)'] }, policy: { allow_shell: true } } });
    assert.equal(result.isError, undefined, JSON.stringify(result));
    const job = result.structuredContent as { status: string; exit_code: number; stdout: { text: string }; job_id: string };
    assert.equal(job.status, 'completed');
    assert.equal(job.exit_code, 0);
    assert.equal(job.stdout.text, '1\n');
    assert.match(job.job_id, /^job_/);
  });

  it('run_job snapshots a local_path workspace: the MCP server is a local caller, as the CLI is', async () => {
    const root = makeWorkspace({ 'hello.txt': 'from the host\n' });
    const result = await client.callTool({ name: 'run_job', arguments: { workspace: { source: 'local_path', path: root }, command: { argv: ['cat', 'hello.txt'] } } });
    const job = result.structuredContent as { status: string; stdout: { text: string } };
    assert.equal(job.status, 'completed', JSON.stringify(result));
    assert.equal(job.stdout.text, 'from the host\n');
  });

  it('run_job answers a policy denial as a result, not a refusal', async () => {
    const result = await client.callTool({ name: 'run_job', arguments: { command: { argv: ['python3', '-c', 'print(1)'] } } });
    assert.equal(result.isError, undefined);
    const job = result.structuredContent as { status: string; error: { code: string } };
    assert.equal(job.status, 'policy_denied');
    assert.equal(job.error.code, 'policy.shell_denied');
  });

  it('refuses arguments that do not match the schema, naming the field', async () => {
    const snippet = await client.callTool({ name: 'run_snippet', arguments: { lang: 'python', code: 'print(1)', timeout: 'soon' } });
    assert.equal(snippet.isError, true);
    assert.deepEqual(snippet.structuredContent, {
      error: { code: 'validation.invalid_request', message: 'timeout must be a number, got string "soon"', details: { field: 'timeout' } },
    });
    assert.deepEqual(snippet.content, [{ type: 'text', text: 'validation.invalid_request: timeout must be a number, got string "soon"' }]);

    const job = await client.callTool({ name: 'run_job', arguments: { command: { argv: [] } } });
    assert.equal(job.isError, true);
    const { error } = job.structuredContent as { error: { code: string; details: { field: string } } };
    assert.equal(error.code, 'validation.invalid_request');
    assert.equal(error.details.field, 'command.argv');
  });

  it('refuses a run_job over a server ceiling before running it', async () => {
    const result = await client.callTool({ name: 'run_job', arguments: { command: { argv: ['true'] }, limits: { timeout_ms: 10 ** 12 } } });
    assert.equal(result.isError, true);
    const { error } = result.structuredContent as { error: { code: string; details: { field: string } } };
    assert.equal(error.code, 'validation.invalid_request');
    assert.equal(error.details.field, 'limits.timeout_ms');
  });

  it('template_list names the templates sandbox_create takes, the host’s base among them', async () => {
    const result = await client.callTool({ name: 'template_list', arguments: {} });
    assert.equal(result.isError, undefined, JSON.stringify(result));
    const { templates } = result.structuredContent as { templates: Array<{ name: string; kind: string }> };
    assert.deepEqual(
      templates.find((template) => template.name === 'base'),
      { name: 'base', kind: 'host' },
    );
    assert.match(String((result.content as Array<{ text: string }>)[0]!.text), /^base \(host\)$/m);
  });

  it('list_runtimes lists python with its version', async () => {
    const result = await client.callTool({ name: 'list_runtimes', arguments: {} });
    const { runtimes } = result.structuredContent as { runtimes: Array<{ language: string; version: string; aliases: string[] }> };
    const python = runtimes.find((runtime) => runtime.language === 'python');
    assert.ok(python, JSON.stringify(runtimes));
    assert.match(python.version, /^3\./);
    assert.match(String((result.content as Array<{ text: string }>)[0]!.text), /^python 3\./m);
  });

  it('a call the client cancels kills its program, and the server keeps serving', async () => {
    const marker = `mcp-cancel-${randomUUID().slice(0, 8)}`;
    const controller = new AbortController();
    const call = client.callTool({ name: 'run_snippet', arguments: { lang: 'bash', code: `exec -a ${marker} sleep 250`, timeout: 280 } }, undefined, { signal: controller.signal });
    // A call answered before its process is seen (a sandbox that could not start) fails here, quoting the answer.
    let answered: unknown;
    void call.then(
      (result) => (answered = result),
      (error: unknown) => (answered = String(error)),
    );
    await waitUntil(() => hostProcessesMatching(marker).length > 0 || answered !== undefined, 'the snippet runs', { seen: () => `stderr ${stderr()}` });
    assert.equal(answered, undefined, `answered before it ran: ${JSON.stringify(answered)}; stderr ${stderr()}`);
    controller.abort();
    await assert.rejects(call, /abort/i);
    await waitUntil(() => hostProcessesMatching(marker).length === 0, 'the canceled snippet is killed', 20_000);
    const next = await client.callTool({ name: 'run_snippet', arguments: { lang: 'bash', code: 'echo still here' } });
    assert.equal((next.structuredContent as { stdout: string }).stdout, 'still here\n');
  });

  it('answers a call to no tool with a protocol error, and keeps serving', async () => {
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), /unknown tool "no_such_tool"/);
    const result = await client.callTool({ name: 'list_runtimes' });
    assert.equal(result.isError, undefined);
    assert.equal(stderr().includes('failed'), false, stderr());
  });
});

describe('agent-runner mcp --workspace-root', () => {
  const root = makeWorkspace({ 'inside.txt': 'inside\n' });
  let client: Client;
  before(async () => {
    ({ client } = await startClient(['mcp', '--workspace-root', root]));
  });
  after(() => client.close());

  it('confines local_path workspaces to the roots, as for HTTP callers', async () => {
    const inside = await client.callTool({ name: 'run_job', arguments: { workspace: { source: 'local_path', path: root }, command: { argv: ['cat', 'inside.txt'] } } });
    assert.equal((inside.structuredContent as { stdout: { text: string } }).stdout.text, 'inside\n', JSON.stringify(inside));
    const outside = await client.callTool({ name: 'run_job', arguments: { workspace: { source: 'local_path', path: makeWorkspace({}) }, command: { argv: ['true'] } } });
    assert.equal(outside.isError, true);
    const { error } = outside.structuredContent as { error: { code: string; details: { field: string } } };
    assert.equal(error.code, 'validation.path_escape');
    assert.equal(error.details.field, 'workspace.path');
  });
});

/** The built CLI spoken to line by line, as a client that may send anything. */
function startRawServer() {
  const child = spawn(process.execPath, [CLI, 'mcp'], { env: processEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  // A server that stopped reading is the failure the tests report, not an EPIPE thrown at them.
  child.stdin.on('error', () => undefined);
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const messages = () =>
    stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as RawMessage);
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    messages,
    sendLine: (line: string) => child.stdin.write(`${line}\n`),
    send: (message: object) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`),
    initialize() {
      this.send({ id: 'init', method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } });
      this.send({ method: 'notifications/initialized' });
    },
    /** What a wait that gives up quotes: everything the server wrote. */
    seen: () => `stdout ${JSON.stringify(stdout.slice(-4000))}, stderr ${JSON.stringify(stderr.slice(-4000))}`,
    /** Waits until a call's process runs on the host; fails at once, quoting it, if the call is answered first. */
    async running(marker: string, id: string | number): Promise<void> {
      await waitUntil(() => hostProcessesMatching(marker).length > 0 || messages().some((message) => message.id === id), `call ${id} runs`, { seen: this.seen });
      assert.ok(hostProcessesMatching(marker).length > 0, `call ${id} was answered before its process was seen: ${this.seen()}`);
    },
    async answer(id: string | number | null, count = 1): Promise<RawMessage> {
      await waitUntil(() => messages().filter((message) => message.id === id).length >= count, `an answer to ${JSON.stringify(id)}`, { seen: this.seen });
      return messages().filter((message) => message.id === id)[count - 1]!;
    },
    /**
     * Its exit code, or 'still running' after 30 s (far below anything it was asked to run). The
     * timer does not hold the test's process: it kept the file alive for 30 s after its tests.
     */
    exit: () => Promise.race([exited, sleep(30_000, undefined, { ref: false }).then(() => 'still running' as const)]),
    /** Whatever the test's outcome: no server outlives its test. */
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

interface RawMessage {
  jsonrpc: string;
  id?: string | number | null;
  result?: { tools?: Array<{ name: string }>; structuredContent?: Record<string, unknown> };
  error?: { code: number; message: string };
}

describe('agent-runner mcp on its own stdio', () => {
  it('speaks only the protocol on stdout, and stops when stdin ends, killing the calls still running', async () => {
    const server = startRawServer();
    try {
      const marker = `mcp-stdin-${randomUUID().slice(0, 8)}`;
      server.initialize();
      server.send({ id: 2, method: 'tools/call', params: { name: 'run_snippet', arguments: { lang: 'bash', code: `exec -a ${marker} sleep 250`, timeout: 280 } } });
      await server.running(marker, 2);
      server.child.stdin.end();
      // Far below the snippet's own 250 s: only a canceled call lets the server stop this soon.
      assert.equal(await server.exit(), 0, server.stderr());
      assert.deepEqual(hostProcessesMatching(marker), []);
      const messages = server.messages();
      assert.ok(
        messages.every((message) => message.jsonrpc === '2.0'),
        server.stdout(),
      );
      assert.equal(messages[0]!.id, 'init');
      assert.match(server.stderr(), /stopping \(stdin closed\)/);
    } finally {
      server.kill();
    }
  });

  it('answers a message over its cap, or one that is not JSON, with an error and goes on serving', async () => {
    const server = startRawServer();
    try {
      server.initialize();
      const code = `# ${'x'.repeat(12 << 20)}`;
      server.send({ id: 'huge', method: 'tools/call', params: { name: 'run_snippet', arguments: { lang: 'python', code } } });
      server.send({ id: 'list', method: 'tools/list' });
      const refused = await server.answer('huge');
      assert.equal(refused.error?.code, -32600);
      assert.match(String(refused.error?.message), /message over 10485760 bytes, the most this server reads in one line/);
      assert.ok((await server.answer('list')).result?.tools?.some((tool) => tool.name === 'run_snippet'));

      server.sendLine('{"jsonrpc": "2.0", "id": "broken", ');
      assert.equal((await server.answer(null)).error?.code, -32700);
      server.send({ id: 'list', method: 'tools/list' });
      assert.ok((await server.answer('list', 2)).result?.tools);
    } finally {
      server.kill();
    }
  });

  it('ends the sessions it made, sandboxes and all, when stdin ends after a message over its cap', async () => {
    const server = startRawServer();
    try {
      const marker = `mcp-session-${randomUUID().slice(0, 8)}`;
      server.initialize();
      server.send({ id: 'create', method: 'tools/call', params: { name: 'session_create', arguments: { lang: 'python' } } });
      const { id } = (await server.answer('create')).result!.structuredContent as { id: string };
      // A process the session's cell leaves running, named by the marker (argv[0]).
      const cell = `import subprocess\nsubprocess.Popen([${JSON.stringify(marker)}, "250"], executable="sleep", start_new_session=True)`;
      server.send({ id: 'cell', method: 'tools/call', params: { name: 'session_exec', arguments: { session_id: id, code: cell } } });
      await server.answer('cell');
      await waitUntil(() => hostProcessesMatching(marker).length > 0, "the session's process runs", { seen: server.seen });
      server.sendLine(`{"jsonrpc": "2.0", "id": "huge", "method": "tools/list", "params": {"pad": "${'x'.repeat(12 << 20)}"}}`);
      assert.equal((await server.answer('huge')).error?.code, -32600);
      server.child.stdin.end();
      assert.equal(await server.exit(), 0, server.stderr());
      assert.deepEqual(hostProcessesMatching(marker), []);
    } finally {
      server.kill();
    }
  });
});
