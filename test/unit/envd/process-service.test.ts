import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Code, ConnectError } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { Process, Signal, type StreamInputRequestSchema } from '../../../src/envd/gen/process/process_pb.js';
import { fakeTarget, startEnvd, type EnvdUnderTest } from '../../helpers/envd.js';
import type { FakeProcess } from '../../helpers/fake-sandbox-agent.js';

const text = (data: Uint8Array) => Buffer.from(data).toString('utf8');

/** The events of a stream as short strings: `start`, `stdout:<text>`, `end:<exitCode>:<status>`... */
async function eventsOf(stream: AsyncIterable<{ event?: { event: { case: string | undefined; value?: unknown } } }>): Promise<string[]> {
  const seen: string[] = [];
  for await (const response of stream) {
    const event = response.event!.event;
    if (event.case === 'start') seen.push('start');
    else if (event.case === 'data') {
      const output = (event.value as { output: { case: string; value: Uint8Array } }).output;
      seen.push(`${output.case}:${text(output.value)}`);
    } else if (event.case === 'end') {
      const end = event.value as { exitCode: number; exited: boolean; status: string; error?: string };
      seen.push(`end:${end.exitCode}:${end.exited}:${end.status}:${end.error ?? ''}`);
    } else seen.push(String(event.case));
  }
  return seen;
}

/** The first process the fake starts from now on. */
function nextStart(target: ReturnType<typeof fakeTarget>): Promise<FakeProcess> {
  return new Promise((resolve) => {
    target.agent.onStart = resolve;
  });
}

async function rejectsWith(promise: Promise<unknown>, code: Code): Promise<void> {
  await assert.rejects(promise, (error: unknown) => error instanceof ConnectError && error.code === code);
}

describe('envd process.Process', () => {
  let envd: EnvdUnderTest;
  const target = fakeTarget();
  before(async () => {
    envd = await startEnvd();
    envd.sandboxes.set('sbx1', target);
  });
  after(() => envd.close());

  it('streams StartEvent, then the output in order, then EndEvent as envd words it', async () => {
    target.agent.onStart = (process) => {
      process.write('stdout', 'one ');
      process.write('stderr', 'oops');
      process.write('stdout', 'two');
      process.exit(3);
    };
    const stream = envd.client(Process, 'sbx1').start({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'x'], envs: { A: '1' } }, stdin: false });
    assert.deepEqual(await eventsOf(stream), ['start', 'stdout:one ', 'stderr:oops', 'stdout:two', 'end:3:true:exit status 3:exit status 3']);
    const started = target.agent.requests.find((request) => request.op === 'start');
    assert.deepEqual(started, { op: 'start', cmd: '/bin/bash', args: ['-l', '-c', 'x'], envs: { A: '1' }, cwd: '/home/user', stdin: false, user: 'user' });
  });

  it('reports a process a signal ended as Go does: exit code -1, not exited, "signal: killed"', async () => {
    target.agent.onStart = (process) => process.exit(0, 9);
    const events = await eventsOf(envd.client(Process, 'sbx1').start({ process: { cmd: 'sleep', args: ['9'] } }));
    assert.deepEqual(events, ['start', 'end:-1:false:signal: killed:signal: killed']);
  });

  it('starts a pseudo-terminal of the size asked, its output as pty data; resizes it with Update', async () => {
    const client = envd.client(Process, 'sbx1');
    const started = nextStart(target);
    const stream = client.start({ process: { cmd: '/bin/bash', args: ['-i', '-l'] }, pty: { size: { cols: 120, rows: 40 } }, tag: 'term' });
    const iterator = stream[Symbol.asyncIterator]();
    assert.equal((await iterator.next()).value!.event!.event.case, 'start');
    const process = await started;
    assert.deepEqual(process.request.pty, { cols: 120, rows: 40 });
    assert.equal(process.request.stdin, true);
    await client.update({ process: { selector: { case: 'tag', value: 'term' } }, pty: { size: { cols: 100, rows: 30 } } });
    assert.deepEqual(process.resizes, [{ cols: 100, rows: 30 }]);
    process.write('pty', '$ ');
    const data = (await iterator.next()).value!.event!.event;
    assert.equal(data.case, 'data');
    process.exit(0);
    await iterator.return?.();
  });

  it('lists running processes with their config and tag; Connect follows one from now on; SendInput and CloseStdin reach it', async () => {
    const client = envd.client(Process, 'sbx1');
    const started = nextStart(target);
    const first = client.start({ process: { cmd: 'cat', args: [], envs: {}, cwd: '/tmp' }, tag: 'cat' })[Symbol.asyncIterator]();
    await first.next();
    const process = await started;
    process.onInput = (data) => process.write('stdout', data);

    const { processes } = await client.list({});
    assert.deepEqual(
      processes.map((info) => ({ pid: info.pid, tag: info.tag, cmd: info.config?.cmd, cwd: info.config?.cwd })),
      [{ pid: process.pid, tag: 'cat', cmd: 'cat', cwd: '/tmp' }],
    );

    const following = client.connect({ process: { selector: { case: 'pid', value: process.pid } } });
    const collected = eventsOf(following);
    // Connect's StartEvent comes once the follower is attached: wait for it before sending.
    while (process.listenerCount < 2) await new Promise((resolve) => setImmediate(resolve));
    await client.sendInput({ process: { selector: { case: 'pid', value: process.pid } }, input: { input: { case: 'stdin', value: Buffer.from('hello') } } });
    await client.closeStdin({ process: { selector: { case: 'tag', value: 'cat' } } });
    assert.equal(process.stdinClosed, true);
    process.exit(0);
    assert.deepEqual(await collected, ['start', 'stdout:hello', 'end:0:true:exit status 0:']);
    await first.return?.();
  });

  it('takes input through StreamInput, a start event then data events', async () => {
    const client = envd.client(Process, 'sbx1');
    const started = nextStart(target);
    const stream = client.start({ process: { cmd: 'cat' } })[Symbol.asyncIterator]();
    await stream.next();
    const process = await started;
    async function* input(): AsyncGenerator<MessageInitShape<typeof StreamInputRequestSchema>> {
      yield { event: { case: 'start' as const, value: { process: { selector: { case: 'pid' as const, value: process.pid } } } } };
      yield { event: { case: 'data' as const, value: { input: { input: { case: 'stdin' as const, value: Buffer.from('a') } } } } };
      yield { event: { case: 'keepalive' as const, value: {} } };
      yield { event: { case: 'data' as const, value: { input: { input: { case: 'stdin' as const, value: Buffer.from('b') } } } } };
    }
    await client.streamInput(input());
    assert.equal(Buffer.concat(process.inputs).toString(), 'ab');
    process.exit(0);
    await stream.return?.();
  });

  it('sends SIGTERM and SIGKILL; an unknown pid or tag is not_found, no signal invalid_argument', async () => {
    const client = envd.client(Process, 'sbx1');
    const started = nextStart(target);
    const events = eventsOf(client.start({ process: { cmd: 'sleep' } }));
    const process = await started;
    process.onSignal = (signal) => signal === 9 && process.exit(0, 9);
    await client.sendSignal({ process: { selector: { case: 'pid', value: process.pid } }, signal: Signal.SIGTERM });
    await client.sendSignal({ process: { selector: { case: 'pid', value: process.pid } }, signal: Signal.SIGKILL });
    assert.deepEqual(process.signals, [15, 9]);
    assert.deepEqual((await events).at(-1), 'end:-1:false:signal: killed:signal: killed');
    await rejectsWith(client.sendSignal({ process: { selector: { case: 'pid', value: process.pid } }, signal: Signal.SIGKILL }), Code.NotFound);
    await rejectsWith(client.sendInput({ process: { selector: { case: 'tag', value: 'nobody' } }, input: { input: { case: 'stdin', value: Buffer.from('x') } } }), Code.NotFound);
    await rejectsWith(client.sendSignal({ process: { selector: { case: 'pid', value: 1 } }, signal: Signal.UNSPECIFIED }), Code.InvalidArgument);
    await rejectsWith(eventsOf(client.connect({ process: { selector: { case: 'pid', value: 99999 } } })), Code.NotFound);
  });

  it('kills the process tree when the Start deadline passes, and not when the client only leaves', async () => {
    const client = envd.client(Process, 'sbx1');
    const started = nextStart(target);
    const left = client.start({ process: { cmd: 'sleep' } })[Symbol.asyncIterator]();
    await left.next();
    const stays = await started;
    await left.return?.();

    const killed = new Promise<number>((resolve) => {
      target.agent.onStart = (process) => {
        process.onSignal = (signal) => {
          resolve(signal);
          process.exit(0, signal);
        };
      };
    });
    await rejectsWith(eventsOf(client.start({ process: { cmd: 'sleep' } }, { timeoutMs: 300 })), Code.DeadlineExceeded);
    assert.equal(await killed, 9);

    const killedAfterLeaving = new Promise<number>((resolve) => {
      target.agent.onStart = (process) => {
        process.onSignal = (signal) => {
          resolve(signal);
          process.exit(0, signal);
        };
      };
    });
    const leaving = client.start({ process: { cmd: 'sleep' } }, { timeoutMs: 300 })[Symbol.asyncIterator]();
    await leaving.next();
    await leaving.return?.();
    assert.equal(await killedAfterLeaving, 9);
    assert.deepEqual(stays.signals, []);
    assert.equal(stays.ended, false);
    stays.exit(0);
  });

  it('ends the streams of a sandbox that ended as unavailable, and only its own', async () => {
    const ending = fakeTarget();
    envd.sandboxes.set('ending', ending);
    const doomed = envd
      .client(Process, 'ending')
      .start({ process: { cmd: 'sleep' } })
      [Symbol.asyncIterator]();
    assert.equal((await doomed.next()).value!.event!.event.case, 'start');
    const started = nextStart(target);
    const other = envd
      .client(Process, 'sbx1')
      .start({ process: { cmd: 'sleep' } })
      [Symbol.asyncIterator]();
    await other.next();
    const survivor = await started;
    envd.envd.sandboxEnded('ending');
    await rejectsWith(doomed.next(), Code.Unavailable);
    survivor.write('stdout', 'still here');
    assert.equal((await other.next()).value!.event!.event.case, 'data');
    survivor.exit(0);
    await other.return?.();
  });

  it('answers a start the agent refuses with its code, and a sandbox that ended as unavailable', async () => {
    const client = envd.client(Process, 'sbx1');
    await rejectsWith(eventsOf(client.start({ process: { cmd: 'ls', cwd: '/nowhere' } })), Code.InvalidArgument);
    await rejectsWith(eventsOf(client.start({ process: { cmd: '' } })), Code.InvalidArgument);
    const gone = fakeTarget();
    gone.agent.gone();
    envd.sandboxes.set('sbx-gone', gone);
    await rejectsWith(envd.client(Process, 'sbx-gone').list({}), Code.Unavailable);
  });
});
