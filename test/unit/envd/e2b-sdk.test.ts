import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { CommandExitError, FileNotFoundError, Sandbox } from 'e2b';
import { fakeTarget, startEnvd, type EnvdUnderTest } from '../../helpers/envd.js';
import type { FakeProcess } from '../../helpers/fake-sandbox-agent.js';

/**
 * The real `e2b` SDK against createEnvdServer and a fake agent. Sandbox.create would first ask
 * the control plane (the front door's, not here); what it does with the answer is this
 * constructor, which is all the envd side of the SDK needs.
 */
function sdkSandbox(envd: EnvdUnderTest, sandboxId: string, envdAccessToken?: string): Sandbox {
  return new Sandbox({ sandboxId, envdVersion: '0.6.4', sandboxUrl: envd.url, apiKey: `e2b_${'0'.repeat(40)}`, ...(envdAccessToken && { envdAccessToken }) });
}

/** The shell commands the SDK runs (`/bin/bash -l -c <command>`), scripted. */
function shell(process: FakeProcess): void {
  const command = process.request.args.at(-1) ?? '';
  if (command.startsWith('echo ')) {
    process.write('stdout', `${command.slice(5)}\n`);
    process.exit(0);
  } else if (command.startsWith('exit ')) {
    process.write('stderr', 'failing\n');
    process.exit(Number(command.slice(5)));
  } else if (command === 'cat') {
    process.onInput = (data) => process.write('stdout', data);
  }
  // anything else runs until signalled
}

describe('the e2b SDK against envd', () => {
  let envd: EnvdUnderTest;
  const target = fakeTarget();
  const secure = fakeTarget('envd-token');
  let sandbox: Sandbox;
  before(async () => {
    envd = await startEnvd();
    envd.sandboxes.set('sdk1', target);
    envd.sandboxes.set('sdk-secure', secure);
    target.agent.onStart = shell;
    secure.agent.onStart = shell;
    sandbox = sdkSandbox(envd, 'sdk1');
  });
  after(() => envd.close());

  it('runs commands: output, exit codes as CommandExitError, cwd and envs passed on', async () => {
    const result = await sandbox.commands.run('echo hello', { cwd: '/tmp', envs: { A: '1' } });
    assert.deepEqual([result.exitCode, result.stdout, result.stderr], [0, 'hello\n', '']);
    const start = target.agent.requests.findLast((request) => request.op === 'start');
    assert.deepEqual(start, { op: 'start', cmd: '/bin/bash', args: ['-l', '-c', 'echo hello'], envs: { A: '1' }, cwd: '/tmp', stdin: false, user: 'user' });
    // The user a call names reaches the agent: processes and files alike.
    await sandbox.commands.run('echo hello', { user: 'root', cwd: '/tmp' });
    assert.equal(target.agent.requests.findLast((request) => request.op === 'start')?.user, 'root');
    await sandbox.files.write('/tmp/by-root', 'r', { user: 'root' });
    assert.equal(target.agent.requests.findLast((request) => request.op === 'write')?.user, 'root');
    await assert.rejects(sandbox.commands.run('exit 3'), (error: unknown) => error instanceof CommandExitError && error.exitCode === 3 && error.stderr === 'failing\n');
  });

  it('runs a background command: listed, fed stdin, reconnected by pid, killed', async () => {
    const handle = await sandbox.commands.run('cat', { background: true, stdin: true });
    assert.ok((await sandbox.commands.list()).some((process) => process.pid === handle.pid));
    const reconnected = await sandbox.commands.connect(handle.pid);
    await sandbox.commands.sendStdin(handle.pid, 'ping');
    while (!handle.stdout.includes('ping') || !reconnected.stdout.includes('ping')) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(await handle.kill(), true);
    await assert.rejects(handle.wait(), (error: unknown) => error instanceof CommandExitError && error.exitCode === -1 && error.error === 'signal: killed');
    assert.equal(await sandbox.commands.kill(handle.pid), false);
  });

  it('opens a pseudo-terminal: input, resize, kill', async () => {
    const output: string[] = [];
    const terminal = await sandbox.pty.create({ cols: 80, rows: 24, onData: (data) => void output.push(Buffer.from(data).toString()) });
    const process = target.agent.processes.get(terminal.pid)!;
    assert.deepEqual(process.request.pty, { cols: 80, rows: 24 });
    process.onInput = (data) => process.write('pty', data);
    await sandbox.pty.sendInput(terminal.pid, new TextEncoder().encode('ls\r'));
    while (!output.join('').includes('ls')) await new Promise((resolve) => setTimeout(resolve, 10));
    await sandbox.pty.resize(terminal.pid, { cols: 100, rows: 30 });
    assert.deepEqual(process.resizes, [{ cols: 100, rows: 30 }]);
    assert.equal(await sandbox.pty.kill(terminal.pid), true);
    await assert.rejects(terminal.wait(), CommandExitError);
  });

  it('writes, reads, lists, renames and removes files; a missing one is FileNotFoundError', async () => {
    const written = await sandbox.files.write('docs/readme.md', '# hi');
    assert.equal(written.path, '/home/user/docs/readme.md');
    assert.equal(await sandbox.files.read('docs/readme.md'), '# hi');
    const bytes = randomBytes(3 * 1024 * 1024 + 7);
    await sandbox.files.write('/tmp/blob.bin', bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer);
    assert.ok(Buffer.from(await sandbox.files.read('/tmp/blob.bin', { format: 'bytes' })).equals(bytes));

    assert.equal(await sandbox.files.makeDir('docs/sub'), true);
    assert.equal(await sandbox.files.makeDir('docs/sub'), false);
    const listed = await sandbox.files.list('docs', { depth: 2 });
    assert.deepEqual(
      listed.map((entry) => [entry.path, entry.type]),
      [
        ['/home/user/docs/readme.md', 'file'],
        ['/home/user/docs/sub', 'dir'],
      ],
    );
    const info = await sandbox.files.getInfo('docs/readme.md');
    assert.deepEqual([info.size, info.type, info.modifiedTime instanceof Date], [4, 'file', true]);
    await sandbox.files.rename('docs/readme.md', 'docs/README.md');
    assert.equal(await sandbox.files.exists('docs/readme.md'), false);
    await sandbox.files.remove('docs/README.md');
    await assert.rejects(sandbox.files.read('docs/README.md'), FileNotFoundError);
  });

  it('watches a directory recursively', async () => {
    await sandbox.files.makeDir('watched');
    const seen: string[] = [];
    const handle = await sandbox.files.watchDir('watched', (event) => void seen.push(`${event.type}:${event.name}`), { recursive: true });
    await sandbox.files.write('watched/a/b.txt', 'x');
    while (seen.length < 1) await new Promise((resolve) => setTimeout(resolve, 10));
    await handle.stop();
    assert.ok(seen.includes('create:a/b.txt'), seen.join(', '));
  });

  it('uses a secure sandbox with its token, and signed URLs without it', async () => {
    const secured = sdkSandbox(envd, 'sdk-secure', 'envd-token');
    await secured.files.write('s.txt', 'secret');
    assert.equal((await secured.commands.run('echo ok')).stdout, 'ok\n');
    const download = await secured.downloadUrl('s.txt', { useSignatureExpiration: 60_000 });
    const response = await fetch(download, { headers: { 'E2b-Sandbox-Id': 'sdk-secure' } });
    assert.equal(await response.text(), 'secret');
    const tokenless = sdkSandbox(envd, 'sdk-secure');
    await assert.rejects(tokenless.files.list('/'));
  });

  it('sees a sandbox envd does not have as not running', async () => {
    assert.equal(await sandbox.isRunning(), true);
    assert.equal(await sdkSandbox(envd, 'never-made').isRunning(), false);
  });
});
