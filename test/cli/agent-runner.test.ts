import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runCli } from '../helpers/cli.js';
import { TEST_STATE_DIR } from '../helpers/runtime.js';

describe('agent-runner CLI', () => {
  it('lists every command in --help', async () => {
    const { code, stdout } = await runCli('agent-runner', ['--help']);
    assert.equal(code, 0);
    for (const command of ['exec', 'guest']) assert.match(stdout, new RegExp(`^  ${command} `, 'm'));
  });

  it('exec reads a request on stdin and prints the response', async () => {
    const { code, stdout } = await runCli('agent-runner', ['exec'], { stdin: JSON.stringify({ trace_id: 'cli-1', lang: 'python', code: 'print(40 + 2)', timeout: 10 }) });
    assert.equal(code, 0);
    assert.deepEqual(JSON.parse(stdout), { trace_id: 'cli-1', stdout: '42\n', stderr: '', exit_code: 0, error: '' });
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
    assert.deepEqual(languages.map((language) => language.name), ['python', 'node', 'go', 'rust', 'bash']);
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
    const guest = spawn(process.execPath, [fileURLToPath(new URL('../../dist/cli/agent-runner.js', import.meta.url)), 'guest', '--listen', `unix:${socket}`], {
      env: { ...process.env, AGENT_RUNNER_STATE_DIR: TEST_STATE_DIR },
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

  it('agent-exec schema prints the shipped response schema', async () => {
    const { code, stdout } = await runCli('agent-exec', ['schema']);
    assert.equal(code, 0);
    const response = JSON.parse(stdout) as { ok: boolean; type: string; schema_format: string; schema: { title: string } };
    assert.equal(response.type, 'schema');
    assert.equal(response.schema_format, 'json-schema-draft-07');
    assert.equal(response.schema.title, 'agent-exec CLI response schema');
  });
});
