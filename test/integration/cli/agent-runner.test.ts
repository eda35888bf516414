import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCli } from '../../helpers/cli.js';
import { processEnv, TEST_STATE_DIR } from '../../helpers/runtime.js';
import { makeWorkspace } from '../../helpers/workspace.js';

describe('agent-runner CLI', () => {
  it('lists every command in --help', async () => {
    const { code, stdout } = await runCli('agent-runner', ['--help']);
    assert.equal(code, 0);
    for (const command of ['exec', 'run', 'task', 'serve', 'guest', 'mcp', 'schema']) assert.match(stdout, new RegExp(`^  ${command} `, 'm'));
  });

  it('exec reads a request on stdin and prints the response', async () => {
    const { code, stdout } = await runCli('agent-runner', ['exec'], { stdin: JSON.stringify({ trace_id: 'cli-1', lang: 'python', code: 'print(40 + 2)', timeout: 10 }) });
    assert.equal(code, 0);
    const { usage, ...response } = JSON.parse(stdout);
    assert.deepEqual(response, { trace_id: 'cli-1', stdout: '42\n', stderr: '', exit_code: 0, error: '' });
    assert.ok(usage.wall_ms > 0, JSON.stringify(usage));
  });

  it('exec takes --lang and --code, and exits with the snippet exit code', async () => {
    const { code, stdout } = await runCli('agent-runner', ['exec', '--lang', 'bash', '--code', 'echo out; exit 3']);
    assert.equal(code, 3);
    const response = JSON.parse(stdout) as { stdout: string; exit_code: number };
    assert.equal(response.stdout, 'out\n');
    assert.equal(response.exit_code, 3);
  });

  it('exec answers stdin that is not JSON with exit_code 2', async () => {
    const { code, stdout } = await runCli('agent-runner', ['exec'], { stdin: '{not json' });
    assert.equal(code, 2);
    assert.match((JSON.parse(stdout) as { error: string }).error, /^invalid request: stdin is not valid JSON/);
  });

  it('exec --list-languages prints each language with its version', async () => {
    const { code, stdout } = await runCli('agent-runner', ['exec', '--list-languages']);
    assert.equal(code, 0);
    const { languages } = JSON.parse(stdout) as { languages: Array<{ name: string; available: boolean; version: string }> };
    assert.deepEqual(
      languages.map((language) => language.name),
      ['python', 'node', 'go', 'rust', 'bash', 'c', 'cpp', 'typescript', 'ruby', 'php', 'perl', 'lua', 'java'],
    );
    assert.ok(languages.every((language) => language.available && language.version));
  });

  it('exec --list-backends says how limits are enforced', async () => {
    const { stdout } = await runCli('agent-runner', ['exec', '--list-backends']);
    const { backends } = JSON.parse(stdout) as { backends: Array<{ name: string; available: boolean; resourceControl: string }> };
    assert.equal(backends[0]!.name, 'local');
    assert.ok(backends[0]!.available);
    assert.match(backends[0]!.resourceControl, /^(cgroup-v1|cgroup-v2|rlimits-only)$/);
  });

  it('guest serves a unix socket that exec --guest talks to', async () => {
    const socket = join(mkdtempSync(join(tmpdir(), 'cli-guest-')), 'guest.sock');
    const guest = spawn(process.execPath, [fileURLToPath(new URL('../../../dist/cli/agent-runner.js', import.meta.url)), 'guest', '--listen', `unix:${socket}`], {
      env: processEnv(),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    try {
      await new Promise<void>((resolve, reject) => {
        guest.stderr.on('data', (chunk: Buffer) => chunk.toString().includes('listening') && resolve());
        guest.on('exit', (code) => reject(new Error(`guest exited ${code}`)));
      });
      const { stdout } = await runCli('agent-runner', ['exec', '--guest', `unix:${socket}`, '--lang', 'node', '--code', 'console.log("via guest")']);
      assert.equal((JSON.parse(stdout) as { stdout: string }).stdout, 'via guest\n');
    } finally {
      guest.kill('SIGTERM');
    }
    const exitCode = await new Promise((resolve) => guest.on('exit', resolve));
    assert.equal(exitCode, 0);
  });

  it('run takes a workspace and argv after --, prints the result, and exits 0 only when completed', async () => {
    const workspace = makeWorkspace({ 'hello.py': 'print("from run")\n' });
    const ok = await runCli('agent-runner', ['run', '--workspace', workspace, '--', 'python3', 'hello.py']);
    assert.equal(ok.code, 0, ok.stderr);
    const result = JSON.parse(ok.stdout) as { status: string; stdout: { text: string } };
    assert.equal(result.status, 'completed');
    assert.equal(result.stdout.text, 'from run\n');
    const denied = await runCli('agent-runner', ['run', '--', 'bash', '-c', 'id']);
    assert.equal(denied.code, 1);
    assert.equal((JSON.parse(denied.stdout) as { error: { code: string } }).error.code, 'policy.shell_denied');
  });

  it('run reads a RunJobRequest on stdin', async () => {
    const { code, stdout } = await runCli('agent-runner', ['run'], { stdin: JSON.stringify({ job_id: 'cli-stdin-job', command: { argv: ['echo', 'stdin request'] } }) });
    assert.equal(code, 0);
    const result = JSON.parse(stdout) as { job_id: string; stdout: { text: string } };
    assert.equal(result.job_id, 'cli-stdin-job');
    assert.equal(result.stdout.text, 'stdin request\n');
    assert.deepEqual(JSON.parse(readFileSync(join(TEST_STATE_DIR, 'runs', 'cli-stdin-job', 'result.json'), 'utf8')), result, 'kept beside its logs');
  });

  it('refuses flags it could only misread, saying which and why', async () => {
    const refusals: Array<[string[], RegExp]> = [
      [['exec', '--lang', 'python', '--code', 'print(1)', '--timeout', 'abc'], /--timeout must be a positive number, got "abc"/],
      [['exec', '--lang', 'python', '--code', 'print(1)', '--file', 'x.py'], /'-f, --file <path>' cannot be used with option '-c, --code <code>'/],
      [['run', '--request', 'request.json', '--', 'echo', 'hi'], /--request request.json is the whole RunJobRequest.*\["echo","hi"\]/],
    ];
    for (const [args, message] of refusals) {
      const { code, stdout, stderr } = await runCli('agent-runner', args);
      assert.notEqual(code, 0);
      assert.equal(stdout, '');
      assert.match(stderr, message);
    }
  });

  it('task reads a task request and prints its response', async () => {
    const request = {
      lang: 'node',
      mode: 'all_items',
      code: 'console.log("n", items.length); return items.map((item) => ({ seen: item.json.v }));',
      items: [{ json: { v: 'a' } }],
    };
    const { code, stdout } = await runCli('agent-runner', ['task'], { stdin: JSON.stringify(request) });
    assert.equal(code, 0);
    const response = JSON.parse(stdout) as { result: unknown[]; print_args: string[][] };
    assert.deepEqual(response.result, [{ json: { seen: 'a' } }]);
    assert.deepEqual(response.print_args, [["'n'", '1']]);
  });

  it('schema prints each contract shape as JSON Schema', async () => {
    for (const [name, title] of [
      ['run-request', 'Run job request'],
      ['run-result', 'Run job result'],
      ['snippet-request', 'Snippet job request'],
      ['snippet-response', 'Snippet job response'],
      ['task-response', 'Code task response'],
    ]) {
      const { code, stdout } = await runCli('agent-runner', ['schema', name!]);
      assert.equal(code, 0);
      const schema = JSON.parse(stdout) as { title: string; $schema: string };
      assert.equal(schema.title, title);
      assert.equal(schema.$schema, 'http://json-schema.org/draft-07/schema#');
    }
    const unknown = await runCli('agent-runner', ['schema', 'nope']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown schema "nope"/);
  });

  it('agent-exec schema prints the shipped response schema', async () => {
    const { code, stdout } = await runCli('agent-exec', ['schema']);
    assert.equal(code, 0);
    const response = JSON.parse(stdout) as { ok: boolean; type: string; schema_format: string; schema: { title: string } };
    assert.equal(response.type, 'schema');
    assert.equal(response.schema_format, 'json-schema-draft-07');
    assert.equal(response.schema.title, 'agent-exec CLI response schema');
  });
});
