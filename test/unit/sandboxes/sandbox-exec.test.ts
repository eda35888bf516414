import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CodedError } from '../../../src/contract/errors.js';
import { SandboxGoneError } from '../../../src/sandboxes/agent-port.js';
import { runToEnd, type ExecLimits } from '../../../src/sandboxes/sandbox-exec.js';
import { readSandboxFile, writeSandboxFile } from '../../../src/sandboxes/sandbox-files.js';
import { FakeSandboxAgent } from '../../helpers/fake-sandbox-agent.js';

const ID = 'a'.repeat(24);
const LIMITS: ExecLimits = { timeoutMs: 60_000, maxStdoutBytes: 1024, maxStderrBytes: 1024 };
const running = () => new AbortController().signal;
const codeOf = (code: string) => (error: unknown) => error instanceof CodedError && error.error.code === code;

/**
 * A command run to its end (sandboxes/sandbox-exec.ts) and files moved in chunks
 * (sandboxes/sandbox-files.ts), over a scripted agent: the caps, the kill at the timeout, stdin,
 * a sandbox that ends mid-run. The real agent: test/integration/sandboxes/faces.test.ts.
 */
describe('runToEnd', () => {
  it('runs argv as it is and cmd through a login bash, and answers a signal as 128 + n', async () => {
    const agent = new FakeSandboxAgent();
    agent.onStart = (process) => process.exit(0, 15);
    const result = await runToEnd(ID, agent, { cmd: 'echo hi | wc -c', envs: { A: 'b' }, cwd: '/tmp' }, LIMITS, running());
    assert.equal(result.exit_code, 143);
    assert.equal(result.timed_out, false);
    assert.deepEqual(agent.processes.size, 0);
    agent.onStart = (process) => {
      assert.deepEqual(
        [process.request.cmd, process.request.args, process.request.envs, process.request.cwd],
        ['/bin/bash', ['-l', '-c', 'echo hi | wc -c'], { A: 'b' }, undefined],
      );
      process.exit(0);
    };
    await runToEnd(ID, agent, { cmd: 'echo hi | wc -c', envs: { A: 'b' } }, LIMITS, running());
  });

  it('keeps each stream up to its cap, cut between characters, and says how much there was', async () => {
    const agent = new FakeSandboxAgent();
    agent.onStart = (process) => {
      process.write('stdout', 'abcdef');
      process.write('stdout', 'ghij');
      process.write('stderr', 'ééé');
      process.exit(1);
    };
    const result = await runToEnd(ID, agent, { argv: ['noisy'] }, { ...LIMITS, maxStdoutBytes: 8, maxStderrBytes: 5 }, running());
    assert.equal(result.stdout, 'abcdefgh\n[stdout truncated: 10 bytes, the first 8 kept]');
    assert.equal(result.stderr, 'éé\n[stderr truncated: 6 bytes, the first 4 kept]');
    assert.equal(result.exit_code, 1);
  });

  it('feeds stdin and closes it', async () => {
    const agent = new FakeSandboxAgent();
    agent.onStart = (process) => {
      process.onInput = (data) => process.write('stdout', data);
    };
    const done = runToEnd(ID, agent, { argv: ['cat'], stdin: 'line\n' }, LIMITS, running());
    const process = await waitForProcess(agent);
    while (!process.stdinClosed) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(process.request.stdin, true);
    process.exit(0);
    assert.equal((await done).stdout, 'line\n');
  });

  it('kills the process group at the timeout and answers 124', async () => {
    const agent = new FakeSandboxAgent();
    const result = await runToEnd(ID, agent, { argv: ['sleep', '300'] }, { ...LIMITS, timeoutMs: 10 }, running());
    assert.equal(result.exit_code, 124);
    assert.equal(result.timed_out, true);
  });

  it('stops waiting when the sandbox ends under the command', async () => {
    const agent = new FakeSandboxAgent();
    const ended = new AbortController();
    const done = runToEnd(ID, agent, { argv: ['sleep', '300'] }, LIMITS, ended.signal);
    await waitForProcess(agent);
    ended.abort();
    await assert.rejects(done, SandboxGoneError);
  });
});

describe('sandbox files', () => {
  it('writes and reads a file larger than one chunk, relative to the home directory', async () => {
    const agent = new FakeSandboxAgent();
    const content = Buffer.alloc(2.5 * 1024 * 1024, 7);
    assert.deepEqual(await writeSandboxFile(agent, 'dir/big.bin', content, 8 << 20), { path: '/home/user/dir/big.bin', bytes: content.length });
    assert.ok(agent.file('/home/user/dir/big.bin')!.equals(content));
    assert.ok((await readSandboxFile(agent, '/home/user/dir/big.bin', 8 << 20)).equals(content));
    assert.deepEqual(await writeSandboxFile(agent, 'empty', Buffer.alloc(0), 8), { path: '/home/user/empty', bytes: 0 });
  });

  it('refuses what is over the limit, missing or a directory with the contract’s codes', async () => {
    const agent = new FakeSandboxAgent();
    await writeSandboxFile(agent, 'nine', Buffer.from('123456789'), 16);
    await assert.rejects(readSandboxFile(agent, 'nine', 8), codeOf('sandbox.file_too_large'));
    await assert.rejects(writeSandboxFile(agent, 'ten', Buffer.alloc(10), 8), codeOf('sandbox.file_too_large'));
    await assert.rejects(readSandboxFile(agent, 'missing', 8), codeOf('sandbox.file_not_found'));
    await assert.rejects(readSandboxFile(agent, '/home/user', 8), codeOf('sandbox.file_not_regular'));
  });
});

async function waitForProcess(agent: FakeSandboxAgent) {
  while (agent.processes.size === 0) await new Promise((resolve) => setImmediate(resolve));
  return [...agent.processes.values()][0]!;
}
