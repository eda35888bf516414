import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AgentChannel } from '../../../src/sandboxes/agent-channel.js';
import { AgentOperationError, SandboxGoneError } from '../../../src/sandboxes/agent-port.js';
import { encodeFrame, FrameDecoder } from '../../../src/wire/frame-codec.js';
import { waitUntil } from '../../helpers/wait.js';

/** A frame of JSON text as it is (spaces and all), and bytes after it past a NUL. */
function frameOfText(json: string, bytes: Buffer): Buffer {
  const payload = Buffer.concat([Buffer.from(json), Buffer.from([0]), bytes]);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(payload.length);
  return Buffer.concat([head, payload]);
}

/** What the agent would answer, framed onto the host's end. */
function answer(channel: AgentChannel, message: object): void {
  channel.stdout.write(encodeFrame(message, 1024 * 1024));
}

/** A channel whose processes get `window` bytes of output, and the credits it sends its agent. */
function windowedChannel(window: number) {
  const channel = new AgentChannel('1', window);
  const requests: Array<Record<string, unknown>> = [];
  const decoder = new FrameDecoder();
  channel.stdin.on('data', (chunk: Buffer) => decoder.push(chunk, (message) => void requests.push(message as Record<string, unknown>)));
  const credits = () => requests.filter((request) => request.op === 'credit').map(({ pid, bytes }) => ({ pid, bytes }));
  const tick = () => new Promise((resolve) => setImmediate(resolve));
  return { channel, credits, tick };
}

describe('sandbox agent channel', () => {
  it('refuses requests (busy) while an agent that stopped reading holds 64 MiB unread, instead of growing the worker', async () => {
    // Nothing reads the channel's stdin: an agent the code in its sandbox stopped with SIGSTOP.
    const channel = new AgentChannel();
    const data = Buffer.alloc(16 * 1024 * 1024);
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, index) =>
        Promise.race([channel.request({ op: 'write', path: `f${index}`, data, append: false }), new Promise((resolve) => setImmediate(() => resolve('waiting')))]).catch(
          (error: unknown) => error,
        ),
      ),
    );
    const busy = outcomes.filter((outcome) => outcome instanceof AgentOperationError && outcome.code === 'busy');
    assert.ok(busy.length > 0 && busy.length < outcomes.length, `some sent, then refused: ${outcomes.map(String).join(', ')}`);
    assert.ok(channel.stdin.readableLength + (channel.stdin as unknown as { writableLength: number }).writableLength < 100 * 1024 * 1024);
    channel.lose('test over');
  });

  it("before a checkpoint: only the holder's requests get through, the answers owed come first, and everyone is let in again if it is not taken", async () => {
    const channel = new AgentChannel();
    const owed = channel.request({ op: 'signal', pid: 7, signal: 19 });
    const hold = channel.hold('sandbox x is being paused');
    await assert.rejects(channel.request({ op: 'list' }), (error: unknown) => error instanceof AgentOperationError && error.code === 'busy' && /being paused/.test(error.message));
    // The holder's own (freezing, packing) still go out: the second request sent, id 2.
    const holders = hold.port.request({ op: 'list' });
    let drained = false;
    const waited = hold.drained().then(() => (drained = true));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(drained, false, 'answers are still owed');
    answer(channel, { id: 1 });
    answer(channel, { id: 2, processes: [] });
    await Promise.all([owed, holders, waited]);
    hold.release();
    const listed = channel.request({ op: 'list' });
    answer(channel, { id: 3, processes: [] });
    assert.deepEqual(await listed, { id: 3, processes: [] });
    channel.lose('test over');
  });

  it("moves bytes raw after a frame's JSON with an agent of protocol 2, as base64 with one of protocol 1 (restored), and hands them on as a Buffer", async () => {
    for (const [version, raw] of [
      [undefined, true],
      ['2', true],
      ['1', false],
    ] as const) {
      const channel = new AgentChannel(version);
      const sent: Array<{ message: Record<string, unknown>; bytes: Buffer | undefined }> = [];
      const decoder = new FrameDecoder(undefined, true);
      channel.stdin.on('data', (chunk: Buffer) => decoder.push(chunk, (message, bytes) => void sent.push({ message: message as Record<string, unknown>, bytes })));
      const payload = Buffer.from([0, 1, 2, 0xff, 0]);
      const written = channel.request({ op: 'write', path: 'f', data: payload, append: false });
      await waitUntil(() => sent.length === 1, 'the write is sent');
      const [{ message, bytes }] = sent as [(typeof sent)[0]];
      if (raw) assert.deepEqual([message.data, bytes], [undefined, payload]);
      else assert.deepEqual([message.data, bytes], [payload.toString('base64'), undefined]);
      const entry = { name: 'f', path: '/home/user/f', type: 'file', size: 5, mode: 0o644, permissions: '-rw-r--r--', owner: 'user', group: 'user', modified_ms: 0 };
      answer(channel, { id: message.id, entry });
      await written;
      // Its answers come either way, whichever it speaks.
      const read = channel.request({ op: 'read', path: 'f', offset: 0, length: 5 });
      await waitUntil(() => sent.length === 2, 'the read is sent');
      channel.stdout.write(encodeFrame({ id: sent[1]!.message.id, eof: true }, undefined, payload));
      assert.deepEqual(await read, { id: sent[1]!.message.id, eof: true, data: payload });
      channel.lose('test over');
    }
  });

  it("keeps an output event's bytes on their own, not as a view of a frame its agent padded with megabytes of JSON", async () => {
    const channel = new AgentChannel();
    channel.adopt([5]);
    const seen: Buffer[] = [];
    channel.follow(5, { output: (event) => void seen.push(event.data), end: () => undefined });
    channel.stdout.write(frameOfText(`{"event":"output",${' '.repeat(1 << 20)}"pid":5,"stream":"stdout"}`, Buffer.from('A')));
    assert.deepEqual(seen.map(String), ['A']);
    assert.ok(seen[0]!.buffer.byteLength < 64 * 1024, `the event holds ${seen[0]!.buffer.byteLength} bytes`);
    channel.lose('test over');
  });

  it('speaks as its agent says it speaks: a fresh agent that says protocol 1 is sent base64', async () => {
    const channel = new AgentChannel();
    const sent: Array<{ message: Record<string, unknown>; bytes: Buffer | undefined }> = [];
    const decoder = new FrameDecoder(undefined, true);
    channel.stdin.on('data', (chunk: Buffer) => decoder.push(chunk, (message, bytes) => void sent.push({ message: message as Record<string, unknown>, bytes })));
    answer(channel, { ready: true, version: '1' });
    assert.equal(await channel.started(), '1');
    void channel.request({ op: 'input', pid: 3, data: Buffer.from('hi') }).catch(() => undefined);
    await waitUntil(() => sent.length === 1, 'the input is sent');
    assert.deepEqual([sent[0]!.message.data, sent[0]!.bytes], [Buffer.from('hi').toString('base64'), undefined]);
    channel.lose('test over');
  });

  it('sends a credit refused while the agent read nothing (busy) once it reads again, though no more output comes to carry it', async () => {
    const window = 4096;
    const channel = new AgentChannel(undefined, window);
    channel.adopt([42]);
    // The agent stopped reading: more than 64 MiB waits for it (past what the pipe's reader side holds).
    for (const mebibytes of [1, 40, 30]) void channel.request({ op: 'write', path: 'big', data: Buffer.alloc(mebibytes << 20), append: false }).catch(() => undefined);
    answer(channel, { event: 'output', pid: 42, stream: 'stdout', data: Buffer.alloc(window).toString('base64') });
    const credits: Array<Record<string, unknown>> = [];
    const decoder = new FrameDecoder(128 * 1024 * 1024, true);
    // It reads again: what waited, then the credit it was refused.
    channel.stdin.on('data', (chunk: Buffer) =>
      decoder.push(chunk, (message) => void ((message as { op?: string }).op === 'credit' && credits.push(message as Record<string, unknown>))),
    );
    await waitUntil(() => credits.length === 2, 'the refused credit is sent', { timeoutMs: 10_000 });
    // The adopted process's whole window, sent before the agent stopped reading; then the refused one.
    assert.deepEqual(
      credits.map(({ pid, bytes }) => ({ pid, bytes })),
      [
        { pid: 42, bytes: window },
        { pid: 42, bytes: window },
      ],
    );
    channel.lose('test over');
  });

  it('ends the sandbox whose agent sends output of a process it is not running (the flows it would grow are the host memory)', async () => {
    const channel = new AgentChannel();
    const broken: string[] = [];
    channel.watch(60_000, (reason) => void broken.push(reason));
    channel.stdout.write(encodeFrame({ event: 'output', pid: 99, stream: 'stdout' }, undefined, Buffer.from('x')));
    assert.match(broken[0] ?? '', /output of process 99, which it is not running/);
    channel.lose('test over');
  });

  it('ends the sandbox whose agent sends bytes both raw and as base64, or an output event without any', async () => {
    for (const bad of [
      encodeFrame({ event: 'output', pid: 1, stream: 'stdout', data: 'eA==' }, undefined, Buffer.from('x')),
      encodeFrame({ event: 'output', pid: 1, stream: 'stdout' }),
    ]) {
      const channel = new AgentChannel();
      const broken: string[] = [];
      channel.watch(60_000, (reason) => void broken.push(reason));
      channel.stdout.write(bad);
      assert.match(broken[0] ?? '', /broke its protocol: an output event has (its bytes twice|no bytes)/);
      channel.lose('test over');
    }
  });

  it('restored from a checkpoint: ready at once with the saved agent, and its running processes can be followed once adopted', async () => {
    const channel = new AgentChannel('0.3.0');
    assert.equal(await channel.started(), '0.3.0');
    assert.throws(() => channel.follow(42, { output: () => undefined, end: () => undefined }), /no process 42/);
    channel.adopt([42]);
    const seen: string[] = [];
    channel.follow(42, { output: (event) => void seen.push(event.data.toString()), end: () => void seen.push('end') });
    answer(channel, { event: 'output', pid: 42, stream: 'stdout', data: Buffer.from('still here').toString('base64') });
    assert.deepEqual(seen, ['still here']);
    channel.lose('test over');
  });

  it('pings an agent that is silent, keeps one that answers, and takes one that owes an answer and stays silent for four heartbeats for broken', async () => {
    const heartbeatMs = 20;
    const channel = new AgentChannel('1');
    const pings: number[] = [];
    const decoder = new FrameDecoder();
    // A live agent: every ping is answered, until it stops (a SIGSTOP, a frozen runtime).
    let alive = true;
    channel.stdin.on('data', (chunk: Buffer) =>
      decoder.push(chunk, (message) => {
        const { id, op } = message as { id: number; op: string };
        if (op !== 'ping') return;
        pings.push(id);
        if (alive) setImmediate(() => answer(channel, { id }));
      }),
    );
    const broken: string[] = [];
    channel.watch(heartbeatMs, (reason) => void broken.push(reason));
    await waitUntil(() => pings.length >= 3, 'the silent agent is pinged again and again');
    assert.deepEqual(broken, [], 'an agent that answers its pings is alive');
    alive = false;
    const owed = channel.request({ op: 'list' }).catch((error: unknown) => error);
    // The heartbeat does not hold the process open (a sandbox's never keeps the service up): this wait does.
    await waitUntil(() => broken.length > 0, 'the silent agent is taken for broken');
    const failure = await owed;
    assert.ok(failure instanceof SandboxGoneError && /said nothing for/.test(failure.message), String(failure));
    assert.equal(broken.length, 1, broken.join('; '));
    assert.match(broken[0]!, /owed \d answer\(s\) and said nothing for/);
  });

  it("an input the agent holds back (its process reads none of it) is not the agent's silence; before a checkpoint the host has it answered", async () => {
    const heartbeatMs = 20;
    const channel = new AgentChannel('1');
    const seen: Array<{ id: number; op: string }> = [];
    const decoder = new FrameDecoder();
    // An agent that answers pings and release_input (and the inputs it held with it), never an input by itself.
    const held: number[] = [];
    channel.stdin.on('data', (chunk: Buffer) =>
      decoder.push(chunk, (message) => {
        const { id, op } = message as { id: number; op: string };
        seen.push({ id, op });
        if (op === 'input') held.push(id);
        if (op === 'ping') setImmediate(() => answer(channel, { id }));
        if (op === 'release_input') setImmediate(() => [...held.splice(0), id].forEach((each) => answer(channel, { id: each })));
      }),
    );
    const broken: string[] = [];
    channel.watch(heartbeatMs, (reason) => void broken.push(reason));
    const input = channel.request({ op: 'input', pid: 7, data: Buffer.from('x') });
    await waitUntil(() => seen.filter(({ op }) => op === 'ping').length >= 6, 'the agent is pinged while the input is held');
    assert.deepEqual(broken, [], 'an agent that answers its pings is alive, whatever input it holds');
    const hold = channel.hold('sandbox x is being paused');
    await hold.drained();
    assert.deepEqual(await input, { id: seen.find(({ op }) => op === 'input')!.id });
    assert.ok(seen.some(({ op }) => op === 'release_input'));
    hold.release();
    channel.lose('test over');
  });

  it('holds a connection to the window it was made with, its first output read in the same chunk as its reply', async () => {
    const window = 4096;
    const { channel, credits, tick } = windowedChannel(window);
    const sent: Array<Record<string, unknown>> = [];
    const decoder = new FrameDecoder();
    channel.stdin.on('data', (chunk: Buffer) => decoder.push(chunk, (message) => void sent.push(message as Record<string, unknown>)));
    const output: Buffer[] = [];
    const opened = channel.start({ op: 'connect', port: 8000, output_window: 4 * window }, { output: (event) => void output.push(event.data), end: () => undefined });
    await tick();
    const connect = sent.find(({ op }) => op === 'connect')!;
    assert.equal(connect.output_window, 4 * window);
    // Its reply and a whole window of its output at once: none of it past the connection's window.
    const event = (bytes: number) => encodeFrame({ event: 'output', pid: 9, stream: 'stdout' }, undefined, Buffer.alloc(bytes, 1));
    channel.stdout.write(Buffer.concat([encodeFrame({ id: connect.id, pid: 9 }), ...Array.from({ length: 4 }, () => event(window))]));
    assert.equal((await opened).pid, 9);
    await tick();
    assert.equal(Buffer.concat(output).length, 4 * window);
    // Credited by quarters of its own window, not the channel's.
    assert.deepEqual(credits(), [
      { pid: 9, bytes: window },
      { pid: 9, bytes: window },
      { pid: 9, bytes: window },
      { pid: 9, bytes: window },
    ]);
    channel.lose('test over');
  });

  it("holds a process's output to its window: the agent is credited once its listeners let go, and a sandbox whose agent sends past the window ends", async () => {
    const window = 4096;
    const { channel, credits, tick } = windowedChannel(window);
    channel.adopt([42]);
    await tick();
    assert.deepEqual(credits(), [{ pid: 42, bytes: window }], 'a restored process is credited a whole window');
    let letGo!: () => void;
    channel.follow(42, { output: () => new Promise<void>((resolve) => (letGo = resolve)), end: () => undefined });
    answer(channel, { event: 'output', pid: 42, stream: 'stdout', data: Buffer.alloc(window).toString('base64') });
    await tick();
    assert.equal(credits().length, 1, 'nothing is credited while a listener holds it');
    letGo();
    await tick();
    assert.deepEqual(credits().at(-1), { pid: 42, bytes: window });
    // An agent that keeps sending while all of it is held has left the protocol.
    for (let event = 0; event < 3; event += 1) answer(channel, { event: 'output', pid: 42, stream: 'stdout', data: Buffer.alloc(window).toString('base64') });
    answer(channel, { event: 'output', pid: 42, stream: 'stdout', data: Buffer.alloc(64 * 1024).toString('base64') });
    await assert.rejects(channel.request({ op: 'list' }), (error: unknown) => error instanceof SandboxGoneError && /past its window of 4096/.test(error.message));
  });

  it("while held, the holder's own process (a pause's home packer) is credited past its window; the others wait for the release", async () => {
    const window = 4096;
    const { channel, credits, tick } = windowedChannel(window);
    const output = (pid: number) => answer(channel, { event: 'output', pid, stream: 'stdout', data: Buffer.alloc(window).toString('base64') });
    const user = channel.start({ op: 'start', cmd: 'cat', args: [], envs: {}, stdin: false }, { output: () => undefined, end: () => undefined });
    answer(channel, { id: 1, pid: 7 });
    await user;
    const hold = channel.hold('sandbox x is being paused');
    const packer = hold.port.start({ op: 'start', cmd: 'python3', args: ['home-archive.py', 'pack'], envs: {}, stdin: false }, { output: () => undefined, end: () => undefined });
    answer(channel, { id: 2, pid: 8 });
    await packer;
    output(7);
    output(8);
    await tick();
    // The packer says more than a window in all: it is credited, or it would wait for ever.
    assert.deepEqual(credits(), [{ pid: 8, bytes: window }]);
    output(8);
    await tick();
    assert.deepEqual(credits(), [
      { pid: 8, bytes: window },
      { pid: 8, bytes: window },
    ]);
    hold.release();
    await tick();
    assert.deepEqual(credits().at(-1), { pid: 7, bytes: window }, 'the rest once released');
    channel.lose('test over');
  });
});
