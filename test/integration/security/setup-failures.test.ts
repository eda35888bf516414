import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import type { SnippetResponse } from '../../../src/contract/snippet.js';
import { GuestClient } from '../../../src/guest/client.js';
import { startGuestServer, type GuestServer } from '../../../src/guest/server.js';
import { runJob } from '../../../src/runner/run-job.js';
import { encodeFrame, FrameDecoder } from '../../../src/wire/frame-codec.js';
import { processEnv, testRuntime } from '../../helpers/runtime.js';
import { makeWorkspace } from '../../helpers/workspace.js';

/**
 * Class 9 of the second security round: what goes wrong before the command runs is the
 * runner's set-up failure, reported as such with its reason, never the job's own failure
 * (run.exit_nonzero), and never papered over (a missing cwd is not created). And the guest
 * runner does not serve code execution to the network without a token.
 */

const local = (path: string) => ({ source: 'local_path' as const, path });

describe('set-up failures of run jobs', () => {
  const runtime = testRuntime();
  after(() => runtime.dispose());

  it('a cwd that is a file ends setup_failed / backend.setup_failed', async () => {
    const result = await runJob({ workspace: local(makeWorkspace({ 'notes.txt': 'x' })), command: { argv: ['ls'], cwd: 'notes.txt' } }, { runtime });
    assert.equal(result.status, 'setup_failed', JSON.stringify(result.error));
    assert.equal(result.error?.code, 'backend.setup_failed');
    assert.match(result.error!.message, /command\.cwd "notes\.txt" is not a directory/);
    assert.equal(result.exit_code, null, 'the command never ran');
  });

  it('a cwd the snapshot lacks is not created: setup_failed with the reason', async () => {
    const result = await runJob({ workspace: local(makeWorkspace({ 'src/main.py': '' })), command: { argv: ['ls'], cwd: 'srcc/lib' } }, { runtime });
    assert.equal(result.status, 'setup_failed', JSON.stringify(result));
    assert.equal(result.error?.code, 'backend.setup_failed');
    assert.match(result.error!.message, /command\.cwd "srcc\/lib" does not exist in the workspace snapshot/);
    // Nor without a workspace: the work dir is empty, so only "." exists.
    const bare = await runJob({ command: { argv: ['ls'], cwd: 'build' } }, { runtime });
    assert.equal(bare.status, 'setup_failed');
    assert.equal(bare.error?.code, 'backend.setup_failed');
  });

  it('an existing cwd still works, and "." is the work dir', async () => {
    const path = makeWorkspace({ 'sub/a.txt': 'a' });
    const inSub = await runJob({ workspace: local(path), command: { argv: ['ls'], cwd: 'sub/' } }, { runtime });
    assert.equal(inSub.status, 'completed', JSON.stringify(inSub.error));
    assert.equal(inSub.stdout.text, 'a.txt\n');
    const atRoot = await runJob({ workspace: local(path), command: { argv: ['ls'], cwd: '.' } }, { runtime });
    assert.equal(atRoot.stdout.text, 'sub\n');
  });

  it('a request PATH under which argv[0] is not found ends setup_failed, not run.exit_nonzero', async () => {
    for (const PATH of ['/nonexistent', '', 'relative/bin']) {
      const result = await runJob({ command: { argv: ['ls'], env: { PATH } }, policy: { allowed_env: ['PATH'] } }, { runtime });
      assert.equal(result.status, 'setup_failed', `PATH=${JSON.stringify(PATH)}: ${JSON.stringify(result.error)}`);
      assert.equal(result.error?.code, 'backend.setup_failed');
      assert.match(result.error!.message, /not found on the request's PATH/);
    }
    // A usable PATH runs; so does an absolute argv[0] whatever the PATH.
    const usable = await runJob({ command: { argv: ['ls', '/'], env: { PATH: '/nonexistent:/usr/bin' } }, policy: { allowed_env: ['PATH'] } }, { runtime });
    assert.equal(usable.status, 'completed', JSON.stringify(usable.error));
    const absolute = await runJob({ command: { argv: ['/usr/bin/true'], env: { PATH: '/nonexistent' } }, policy: { allowed_env: ['PATH'] } }, { runtime });
    assert.equal(absolute.status, 'completed', JSON.stringify(absolute.error));
  });
});

/** Sends frames on a raw connection and collects every frame answered until the server closes it. */
function rawExchange(port: number, frames: unknown[]): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    const decoder = new FrameDecoder();
    const answers: unknown[] = [];
    socket.on('data', (chunk) => decoder.push(chunk, (frame) => answers.push(frame)));
    socket.on('error', reject);
    socket.on('end', () => {
      socket.end();
      resolve(answers);
    });
    // Half-closed after the frames: the server answers what it read, then closes.
    socket.write(Buffer.concat(frames.map((frame) => encodeFrame(frame))), () => socket.end());
  });
}

describe('the guest runner on TCP', () => {
  const runtime = testRuntime();
  const servers: GuestServer[] = [];
  after(async () => {
    await Promise.all(servers.map((server) => server.close()));
    await runtime.dispose();
  });

  it('refuses to listen on a non-loopback address without a token or --insecure', async () => {
    await assert.rejects(startGuestServer({ kind: 'tcp', host: '0.0.0.0', port: 0 }, { runtime }), /refusing to listen on tcp:0\.0\.0\.0:0 without a token/);
    await assert.rejects(startGuestServer({ kind: 'tcp', host: '::', port: 0 }, { runtime }), /without a token/);
    const insecure = await startGuestServer({ kind: 'tcp', host: '0.0.0.0', port: 0 }, { runtime, insecure: true });
    servers.push(insecure);
    const loopback = await startGuestServer({ kind: 'tcp', host: '127.0.0.1', port: 0 }, { runtime });
    servers.push(loopback);
  });

  it('with a token, the first frame must authenticate; GuestClient does it', async () => {
    const token = 'guest-token-for-tests';
    const server = await startGuestServer({ kind: 'tcp', host: '0.0.0.0', port: 0 }, { runtime, token });
    servers.push(server);
    const port = (server.address as { port: number }).port;

    const client = await GuestClient.connect({ kind: 'tcp', host: '127.0.0.1', port }, { token });
    const response = await client.request({ lang: 'python', code: 'print("authenticated")' });
    client.close();
    assert.equal(response.stdout, 'authenticated\n');

    await assert.rejects(GuestClient.connect({ kind: 'tcp', host: '127.0.0.1', port }, { token: 'wrong' }), /refused the token/);

    // A request without the handshake is answered with an error frame and the connection
    // closes: nothing ran (the frames after it are not read).
    const answers = (await rawExchange(port, [
      { lang: 'python', code: 'print("should not run")' },
      { lang: 'python', code: 'print("nor this")' },
    ])) as Array<SnippetResponse & { ok?: boolean }>;
    assert.equal(answers.length, 1);
    assert.equal(answers[0]!.ok, false);
    assert.match(answers[0]!.error ?? '', /unauthorized/);
    assert.equal(answers[0]!.stdout, '');

    const authed = (await rawExchange(port, [{ auth: token }, { lang: 'python', code: 'print(2)' }])) as Array<SnippetResponse & { ok?: boolean }>;
    assert.deepEqual(authed[0], { ok: true });
    assert.equal(authed[1]!.stdout, '2\n');
  });

  it('agent-runner guest refuses tcp:0.0.0.0 without --token', async () => {
    const cli = fileURLToPath(new URL('../../../dist/cli/agent-runner.js', import.meta.url));
    const child = spawn(process.execPath, [cli, 'guest', '--listen', 'tcp:0.0.0.0:0'], {
      env: processEnv(),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // A guest that listens instead would never exit: stop it and fail, rather than hang.
    const listening = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (...exit) => resolve(exit)));
    clearTimeout(listening);
    assert.equal(signal, null, `the guest listened on 0.0.0.0 without a token: ${stderr}`);
    assert.notEqual(code, 0);
    assert.match(stderr, /without a token/);
  });
});
