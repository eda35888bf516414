import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { AGENT_OUTPUT_CHUNK_BYTES } from '../../../src/contract/sandbox-agent.js';
import { Process } from '../../../src/envd/gen/process/process_pb.js';
import { AgentChannel } from '../../../src/sandboxes/agent-channel.js';
import { sandboxAgentArgv } from '../../../src/sandboxes/agent-program.js';
import { startEnvd } from '../../helpers/envd.js';
import { waitUntil } from '../../helpers/wait.js';

/**
 * Issue 43, case 2c: clients that open streams of a process and do not read them. The real agent
 * (src/sandboxes/agent/, run here without a sandbox) behind the real envd server: the process's output
 * waits in its pipe, not in the worker, and it goes on once a client reads.
 */
const WINDOW = 256 * 1024;
const OUTPUT_BYTES = 32 * 1024 * 1024;
const SANDBOX = 'sbx-unread';
const scratch = mkdtempSync(join(tmpdir(), 'stream-backpressure-'));
const envd = await startEnvd();
const channel = new AgentChannel(undefined, WINDOW);
const [program, ...args] = sandboxAgentArgv();
const agent = spawn(program!, args, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, HOME: scratch } });
channel.stdin.pipe(agent.stdin);
agent.stdout.on('data', (chunk: Buffer) => channel.stdout.write(chunk));
let agentStderr = '';
agent.stderr.on('data', (chunk: Buffer) => (agentStderr += chunk.toString()));
after(async () => {
  // Its input ended, the agent ends what it started, then itself.
  channel.lose('the test is over');
  await new Promise((resolve) => (agent.exitCode === null ? agent.once('close', resolve) : resolve(null)));
  await envd.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a process whose streams are not read', () => {
  it('waits with its pipe full while the worker holds at most a window per stream, and goes on once read', async () => {
    await channel.started();
    envd.sandboxes.set(SANDBOX, {
      agent: channel,
      accessToken: null,
      home: scratch,
      rootInside: false,
      defaultUser: 'user',
      python: '/usr/bin/python3',
      trafficToken: null,
      maskRequestHost: null,
    });
    const client = envd.client(Process, SANDBOX);
    const started = client.start({ process: { cmd: 'head', args: ['-c', String(OUTPUT_BYTES), '/dev/zero'] } })[Symbol.asyncIterator]();
    const first = await started.next();
    assert.equal(first.value?.event?.event.case, 'start');
    const pid = first.value.event.event.value.pid as number;
    // Three more clients follow the same process and read nothing at all.
    const leave = new AbortController();
    const followers = Array.from({ length: 3 }, () => client.connect({ process: { selector: { case: 'pid', value: pid } } }, { signal: leave.signal })[Symbol.asyncIterator]());
    await Promise.all(followers.map((follower) => follower.next()));

    const perStream = WINDOW + AGENT_OUTPUT_CHUNK_BYTES;
    const seen = () => `queued ${envd.envd.queuedBytes(SANDBOX)} bytes; agent: ${agentStderr}`;
    // The window fills in the worker's queues: the agent stopped reading the process.
    await waitUntil(() => envd.envd.queuedBytes(SANDBOX) >= WINDOW / 2, 'the unread output reaches the window', { seen });
    const { processes } = await channel.request({ op: 'list' });
    assert.ok(
      processes.some((listed) => listed.pid === pid),
      'the process still runs: 32 MiB cannot have left it past a window, its pipe and the sockets',
    );
    assert.ok(envd.envd.queuedBytes(SANDBOX) <= 4 * perStream, seen());

    // One client reads to the end: every byte comes, and the process ends as it would have.
    let bytes = 0;
    let exitCode: number | undefined;
    for (let next = await started.next(); !next.done; next = await started.next()) {
      const event = next.value.event?.event;
      if (event?.case === 'data' && event.value.output.case === 'stdout') bytes += event.value.output.value.length;
      if (event?.case === 'end') exitCode = event.value.exitCode;
      // The followers still read nothing; what they hold stays bounded all along.
      assert.ok(envd.envd.queuedBytes(SANDBOX) <= 4 * perStream, seen());
      // Without them the process would wait on them forever; they leave once the reader is well on.
      if (bytes >= 4 * WINDOW && !leave.signal.aborted) leave.abort();
    }
    assert.equal(bytes, OUTPUT_BYTES);
    assert.equal(exitCode, 0);
  });
});
