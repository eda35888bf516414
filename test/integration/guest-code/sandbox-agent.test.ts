import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import {
  AgentEventSchema,
  AgentFailureSchema,
  AgentReadySchema,
  AgentReplySchemas,
  type AgentEndEvent,
  type AgentEntry,
  type AgentEvent,
  type AgentFsEvent,
  type AgentRequest,
} from '../../../src/contract/sandbox-agent.js';
import { sandboxAgentArgv } from '../../../src/sandboxes/agent-program.js';
import { encodeFrame } from '../../../src/wire/frame-codec.js';
import { waitUntil } from '../../helpers/wait.js';
import { bytesOf, startGuest, stopGuests, type GuestProcess } from './guest-process.js';

/**
 * The sandbox agent (src/sandboxes/agent/, Go; dist/sandboxes/sandbox-agent, built by `npm run
 * build`) run without a sandbox, by the command line the host gives it (sandboxes/agent-program.ts),
 * over pipes, with a scratch directory as its HOME. Every frame it writes is checked against the
 * contract (contract/sandbox-agent.ts) as the host checks it.
 */

const scratchRoot = mkdtempSync(join(tmpdir(), 'sandbox-agent-'));
const agents: AgentClient[] = [];
after(async () => {
  // Each agent ends what it started when its input ends; killed, it could not.
  for (const agent of agents) agent.guest.endInput();
  await Promise.all(agents.map((agent) => agent.guest.exited));
  stopGuests();
  rmSync(scratchRoot, { recursive: true, force: true });
});

type Reply = Record<string, unknown> & { error?: { code: string; message: string } };

/** The host's side of one agent: replies matched to requests by id, events kept in order. */
class AgentClient {
  /** Every frame after the ready one, in the order the agent wrote them. */
  readonly frames: unknown[] = [];
  private readonly replies = new Map<number, Reply>();
  private readonly events: AgentEvent[] = [];
  private ids = 0;
  private ended = false;

  /** `credits`: each output event is credited back as it comes, as the host does when no client holds it. */
  constructor(
    readonly guest: GuestProcess,
    public credits = true,
  ) {
    void this.pump();
  }

  private async pump(): Promise<void> {
    for (;;) {
      let frame: unknown;
      try {
        frame = await this.guest.next();
      } catch {
        this.ended = true;
        return;
      }
      this.frames.push(frame);
      const message = frame as Reply;
      if (typeof message.id === 'number') this.replies.set(message.id, message);
      else {
        assert.ok(Value.Check(AgentEventSchema, frame), `not an event of the contract: ${JSON.stringify(frame)}`);
        this.events.push(frame as AgentEvent);
        const event = frame as AgentEvent;
        if (event.event === 'output' && this.credits) this.guest.send({ id: (this.ids += 1), op: 'credit', pid: event.pid, bytes: bytesOf(event)!.length });
      }
    }
  }

  private seen = () => `${JSON.stringify(this.frames.slice(-10))}; stderr: ${this.guest.stderr()}`;

  /** One request; its reply, checked against the contract's shape for its op (or a failure). */
  async request(request: AgentRequest | Record<string, unknown>): Promise<Reply> {
    return this.reply(this.send(request), (request as { op: keyof typeof AgentReplySchemas }).op);
  }

  /** A connection to `port` on the agent's loopback (op connect): its id. */
  async connectTo(port: number): Promise<number> {
    const reply = await this.request({ op: 'connect', port });
    assert.equal(reply.error, undefined, JSON.stringify(reply));
    return (reply as unknown as { pid: number }).pid;
  }

  /** One request sent, its reply not awaited: its id. Its `data`, if any, goes raw after its JSON. */
  send(request: AgentRequest | Record<string, unknown>): number {
    const id = (this.ids += 1);
    const { data, ...fields } = request as { data?: unknown };
    this.guest.send({ id, ...fields }, data === undefined ? undefined : Buffer.from(data as string | Uint8Array));
    return id;
  }

  /** Whether the agent answered request `id` in the frames read so far. */
  answered(id: number): boolean {
    return this.replies.has(id);
  }

  async reply(id: number, op?: keyof typeof AgentReplySchemas): Promise<Reply> {
    await waitUntil(() => this.replies.has(id) || this.ended, `the reply to request ${id}`, { seen: this.seen });
    const reply = this.replies.get(id);
    assert.ok(reply, `the agent ended before replying to ${id}: ${this.seen()}`);
    const schema = reply.error !== undefined || !op || !(op in AgentReplySchemas) ? AgentFailureSchema : AgentReplySchemas[op];
    assert.ok(Value.Check(schema, reply), `reply of the wrong shape: ${JSON.stringify(reply)}`);
    return reply;
  }

  /** The first event (removed from those kept) that `match` accepts. */
  async event<E extends AgentEvent>(match: (event: AgentEvent) => event is E, what: string): Promise<E> {
    let found: E | undefined;
    await waitUntil(
      () => {
        const index = this.events.findIndex(match);
        if (index >= 0) found = this.events.splice(index, 1)[0] as E;
        return found !== undefined;
      },
      what,
      { seen: this.seen },
    );
    return found!;
  }

  /** Starts a process; asserts that no event of its pid came before the reply. */
  async start(request: Omit<AgentRequest & { op: 'start' }, 'op'>): Promise<number> {
    const reply = await this.request({ op: 'start', ...request });
    assert.equal(reply.error, undefined, JSON.stringify(reply));
    const pid = reply.pid as number;
    const before = this.frames.slice(0, this.frames.indexOf(reply));
    assert.ok(!before.some((frame) => (frame as { pid?: number }).pid === pid), 'an event of the process came before its start reply');
    return pid;
  }

  /** A process's output by stream up to its end, and the end. */
  async finish(pid: number): Promise<{ stdout: string; stderr: string; pty: string; end: AgentEndEvent }> {
    const end = await this.event((event): event is AgentEndEvent => event.event === 'end' && event.pid === pid, `the end of ${pid}`);
    const output = { stdout: '', stderr: '', pty: '' };
    for (const frame of this.frames.slice(0, this.frames.indexOf(end))) {
      const event = frame as AgentEvent;
      if (event.event === 'output' && event.pid === pid) output[event.stream] += bytesOf(event)!.toString('utf8');
    }
    return { ...output, end };
  }

  /** Output of `pid` so far, of every stream. */
  outputSoFar(pid: number): string {
    return this.frames
      .filter((frame): frame is AgentEvent & { event: 'output' } => (frame as AgentEvent).event === 'output' && (frame as { pid: number }).pid === pid)
      .map((event) => bytesOf(event)!.toString('utf8'))
      .join('');
  }

  async waitForOutput(pid: number, pattern: RegExp): Promise<RegExpMatchArray> {
    await waitUntil(() => pattern.test(this.outputSoFar(pid)), `output of ${pid} matching ${pattern}`, { seen: this.seen });
    return this.outputSoFar(pid).match(pattern)!;
  }
}

async function startAgent(argv: string[], home: string, credits = true): Promise<AgentClient> {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
  delete env.TERM;
  const guest = startGuest(argv, { frameFd: 1, env, withBytes: true });
  const ready = await guest.next();
  assert.ok(Value.Check(AgentReadySchema, ready), JSON.stringify(ready));
  const agent = new AgentClient(guest, credits);
  agents.push(agent);
  return agent;
}

/** Gone, or a zombie no one will run again. */
function isGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/** The session id (field 6 of /proc/PID/stat). */
function sessionOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
}

const bytes = (data: string | Buffer) => Buffer.from(data);
/** A shell that starts a python which makes its own session, prints its pid, and sleeps. */
const TREE_WITH_OWN_SESSION = ['-c', `/usr/bin/python3 -c 'import os, time; os.setsid(); print(os.getpid(), flush=True); time.sleep(1000)' & wait`];

const scratch = scratchRoot;
const HOME = join(scratch, 'home');
mkdirSync(HOME, { recursive: true });

describe(`sandbox agent: processes`, () => {
  let agent: AgentClient;
  before(async () => {
    agent = await startAgent(sandboxAgentArgv(), HOME);
  });

  it('runs a command with its env and cwd, stdout and stderr apart, to its exit code', async () => {
    const work = join(scratch, 'work');
    mkdirSync(work, { recursive: true });
    const pid = await agent.start({
      cmd: '/bin/sh',
      args: ['-c', 'echo "out $GREETING $PWD"; echo err >&2; exit 3'],
      envs: { GREETING: 'hi' },
      cwd: work,
      stdin: false,
    });
    const { stdout, stderr, end } = await agent.finish(pid);
    assert.equal(stdout, `out hi ${work}\n`);
    assert.equal(stderr, 'err\n');
    assert.deepEqual(end, { event: 'end', pid, exit_code: 3, signal: null });
  });

  it('starts in $HOME when no cwd is given, with the agent environment', async () => {
    const pid = await agent.start({ cmd: '/bin/sh', args: ['-c', 'pwd; echo "$HOME"'], envs: {}, stdin: false });
    const { stdout, end } = await agent.finish(pid);
    assert.equal(stdout, `${HOME}\n${HOME}\n`);
    assert.equal(end.exit_code, 0);
  });

  it('sends output in events of at most 64 KiB, all before the end, which a lingering grandchild does not hold up', async () => {
    const pid = await agent.start({ cmd: '/bin/sh', args: ['-c', 'yes | head -c 1048576; sleep 1000 & echo "$!"'], envs: {}, stdin: false });
    const { stdout, end } = await agent.finish(pid);
    assert.equal(end.exit_code, 0);
    const sleeper = stdout.slice(1048576);
    assert.equal(stdout.slice(0, 1048576), 'y\n'.repeat(524288));
    assert.match(sleeper, /^\d+\n$/);
    const events = agent.frames.filter((frame) => (frame as AgentEvent).event === 'output' && (frame as { pid: number }).pid === pid);
    assert.ok(events.every((event) => bytesOf(event)!.length <= 65536));
    assert.ok(!isGone(Number(sleeper)), 'the grandchild still holds the pipe');
    process.kill(Number(sleeper), 'SIGKILL');
  });

  it('gives a process its stdio and no other descriptor of the agent (the protocol, the fds it was given)', async () => {
    const pid = await agent.start({ cmd: '/bin/sh', args: ['-c', 'ls /proc/$$/fd'], envs: {}, stdin: true });
    assert.equal((await agent.finish(pid)).stdout, '0\n1\n2\n');
  });

  it('reports a process ended by a signal as a shell does: 128 + n and the signal', async () => {
    const pid = await agent.start({ cmd: '/bin/sh', args: ['-c', 'kill -TERM $$'], envs: {}, stdin: false });
    const { end } = await agent.finish(pid);
    assert.deepEqual(end, { event: 'end', pid, exit_code: 143, signal: 15 });
  });

  it('feeds stdin, then closes it; without stdin a process reads end of file at once', async () => {
    const pid = await agent.start({ cmd: 'cat', args: [], envs: {}, stdin: true });
    const fed = await agent.request({ op: 'input', pid, data: bytes('hello\n') });
    assert.deepEqual(fed, { id: fed.id });
    await agent.waitForOutput(pid, /hello\n/);
    await agent.request({ op: 'input', pid, data: bytes('again') });
    assert.equal((await agent.request({ op: 'close_stdin', pid })).error, undefined);
    const { stdout, end } = await agent.finish(pid);
    assert.equal(stdout, 'hello\nagain');
    assert.equal(end.exit_code, 0);

    const closed = await agent.start({ cmd: 'cat', args: [], envs: {}, stdin: false });
    assert.deepEqual((await agent.finish(closed)).stdout, '');
    const noInput = await agent.request({ op: 'input', pid: closed, data: bytes('late') });
    assert.equal(noInput.error?.code, 'no_such_process');
  });

  it('feeds more input than a pipe holds without blocking, while reading what the process writes back', async () => {
    const input = randomBytes(4 << 20).toString('hex');
    const pid = await agent.start({ cmd: 'cat', args: [], envs: {}, stdin: true });
    assert.equal((await agent.request({ op: 'resize', pid, cols: 80, rows: 24 })).error?.code, 'invalid', 'no terminal to resize');
    for (let offset = 0; offset < input.length; offset += 1 << 20) {
      assert.equal((await agent.request({ op: 'input', pid, data: bytes(input.slice(offset, offset + (1 << 20))) })).error, undefined);
    }
    await agent.request({ op: 'close_stdin', pid });
    const { stdout, end } = await agent.finish(pid);
    assert.equal(stdout.length, input.length);
    assert.ok(stdout === input);
    assert.equal(end.exit_code, 0);
  });

  it("holds its answer to an input while the process leaves more than a window of it unread: the host's next write waits, the agent holds no more", async () => {
    const go = join(HOME, 'go-read');
    const pid = await agent.start({ cmd: '/bin/sh', args: ['-c', `while [ ! -e ${go} ]; do sleep 0.02; done; exec wc -c`], envs: {}, stdin: true });
    const held = agent.send({ op: 'input', pid, data: bytes(Buffer.alloc(2 << 20, 1)) });
    // Requests are answered in order: a ping answered after it says the input is held back.
    assert.equal((await agent.request({ op: 'ping' })).error, undefined);
    assert.equal(agent.answered(held), false, 'an input is not answered while its process reads none of it');
    writeFileSync(go, '');
    assert.equal((await agent.reply(held, 'input')).error, undefined);
    assert.equal((await agent.request({ op: 'close_stdin', pid })).error, undefined);
    const { stdout, end } = await agent.finish(pid);
    assert.equal(stdout.trim(), String(2 << 20));
    assert.equal(end.exit_code, 0);
    rmSync(go);
  });

  it('runs a process on a terminal of the size asked, resized, echoing its input', async () => {
    const pid = await agent.start({
      cmd: '/bin/sh',
      args: ['-c', 'tty; echo "term:$TERM"; stty size; read line; stty size; echo "line:$line"'],
      envs: {},
      stdin: true,
      pty: { cols: 100, rows: 30 },
    });
    await agent.waitForOutput(pid, /30 100\r\n/);
    assert.equal((await agent.request({ op: 'resize', pid, cols: 120, rows: 40 })).error, undefined);
    await agent.request({ op: 'input', pid, data: bytes('hello\n') });
    const { pty, stdout, stderr, end } = await agent.finish(pid);
    assert.equal(stdout + stderr, '');
    assert.match(pty, /^\/dev\/pts\/\d+\r\nterm:xterm-256color\r\n30 100\r\n/);
    // The terminal echoes the line typed, then the program sees the new size and the line.
    assert.match(pty, /hello\r\n40 120\r\nline:hello\r\n$/);
    assert.equal(end.exit_code, 0);
  });

  it('connects to a port on its loopback itself, served as a process: input to the server, its answer as output, a half-close passed on, the end when the server closes', async () => {
    const seen: string[] = [];
    const server = createServer({ allowHalfOpen: true }, (socket: Socket) => {
      socket.on('data', (chunk: Buffer) => {
        seen.push(chunk.toString('utf8'));
        socket.write(`echo:${chunk.toString('utf8')}`);
      });
      // The client's half-close reaches the server, which answers and closes its side.
      socket.on('end', () => socket.end('bye'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const pid = await agent.connectTo(port);
      assert.ok(pid > 1 << 22, 'its id is no pid of the kernel');
      assert.equal((await agent.request({ op: 'input', pid, data: bytes('hello') })).error, undefined);
      await agent.waitForOutput(pid, /echo:hello/);
      const { processes } = (await agent.request({ op: 'list' })) as { processes: Array<{ pid: number }> };
      assert.ok(!processes.some((process) => process.pid === pid), 'a connection is not one of the processes');
      assert.equal((await agent.request({ op: 'close_stdin', pid })).error, undefined);
      const { stdout, end } = await agent.finish(pid);
      assert.equal(stdout, 'echo:hellobye');
      assert.equal(end.exit_code, 0);
      assert.deepEqual(seen, ['hello']);

      // Dropped by a signal: its end says so, and the server sees the connection closed.
      const dropped = await agent.connectTo(port);
      assert.equal((await agent.request({ op: 'signal', pid: dropped, signal: 9 })).error, undefined);
      assert.deepEqual((await agent.finish(dropped)).end, { event: 'end', pid: dropped, exit_code: 137, signal: 9 });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    // Nobody listens there now.
    const refused = await agent.request({ op: 'connect', port });
    assert.equal(refused.error?.code, 'refused');
  });

  it('connects to a server that listens on ::1 alone, when 127.0.0.1 refuses', async () => {
    const server = createServer((socket: Socket) => socket.end('from ::1'));
    await new Promise<void>((resolve) => server.listen(0, '::1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const pid = await agent.connectTo(port);
      const { stdout, end } = await agent.finish(pid);
      assert.deepEqual([stdout, end.exit_code], ['from ::1', 0]);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('signals the whole tree, a descendant that made its own session included', async () => {
    const pid = await agent.start({ cmd: '/bin/sh', args: TREE_WITH_OWN_SESSION, envs: {}, stdin: false });
    const grandchild = Number((await agent.waitForOutput(pid, /^(\d+)\n/))[1]);
    assert.ok(!isGone(grandchild));
    assert.notEqual(sessionOf(grandchild), sessionOf(pid), 'the grandchild has a session of its own');
    assert.equal((await agent.request({ op: 'signal', pid, signal: 9 })).error, undefined);
    const { end } = await agent.finish(pid);
    assert.deepEqual(end, { event: 'end', pid, exit_code: 137, signal: 9 });
    await waitUntil(() => isGone(grandchild), `grandchild ${grandchild} gone`);
    assert.equal((await agent.request({ op: 'signal', pid, signal: 9 })).error?.code, 'no_such_process');
  });

  it('lists the running processes with what they were started with', async () => {
    const pid = await agent.start({ cmd: 'sleep', args: ['1000'], envs: { WHY: 'background' }, cwd: scratch, tag: 'background-job', stdin: false });
    const { processes } = (await agent.request({ op: 'list' })) as { processes: unknown[] };
    assert.deepEqual(
      processes.find((process) => (process as { pid: number }).pid === pid),
      { pid, cmd: 'sleep', args: ['1000'], envs: { WHY: 'background' }, cwd: scratch, tag: 'background-job' },
    );
    await agent.request({ op: 'signal', pid, signal: 15 });
    assert.equal((await agent.finish(pid)).end.signal, 15);
    const after = (await agent.request({ op: 'list' })) as { processes: Array<{ pid: number }> };
    assert.ok(!after.processes.some((process) => process.pid === pid));
  });

  it('stops reading a process its host has not credited: its pipe fills and it waits, until a credit lets it go on', async () => {
    const held = await startAgent(sandboxAgentArgv(), HOME, false);
    const window = 128 * 1024;
    const total = 4 * 1024 * 1024;
    const pid = await held.start({ cmd: 'head', args: ['-c', String(total), '/dev/zero'], envs: {}, stdin: false, output_window: window });
    await waitUntil(() => held.outputSoFar(pid).length >= window, 'a window of output');
    // Answered after any read the agent made: what it sent by then is all it sends uncredited.
    const { processes } = (await held.request({ op: 'list' })) as { processes: Array<{ pid: number }> };
    const sent = held.outputSoFar(pid).length;
    assert.ok(sent <= window + 64 * 1024, `${sent} bytes sent on a window of ${window}`);
    assert.ok(
      processes.some((process) => process.pid === pid),
      'the process waits on its full pipe: 4 MiB cannot have left it',
    );
    held.credits = true;
    assert.equal((await held.request({ op: 'credit', pid, bytes: sent })).error, undefined);
    const { stdout, end } = await held.finish(pid);
    assert.equal(stdout.length, total);
    assert.equal(end.exit_code, 0);
  });

  it('refuses a command it cannot execute, starting nothing', async () => {
    const missing = await agent.request({ op: 'start', cmd: '/nonexistent/program', args: [], envs: {}, stdin: false });
    assert.equal(missing.error?.code, 'not_found');
    assert.equal(missing.pid, undefined);
    const script = join(scratch, 'not-executable.sh');
    writeFileSync(script, 'echo hi\n', { mode: 0o644 });
    const denied = await agent.request({ op: 'start', cmd: script, args: [], envs: {}, stdin: false });
    assert.equal(denied.error?.code, 'permission_denied');
    const missingCwd = await agent.request({ op: 'start', cmd: '/bin/true', args: [], envs: {}, cwd: join(scratch, 'nowhere'), stdin: false });
    assert.equal(missingCwd.error?.code, 'not_found');
    const { processes } = (await agent.request({ op: 'list' })) as { processes: unknown[] };
    assert.deepEqual(processes, []);
  });

  it('answers a malformed request with `invalid` when it has an id, and goes on', async () => {
    agent.guest.write(Buffer.concat([Buffer.from([0, 0, 0, 5]), Buffer.from('nope!')]));
    agent.guest.write(encodeFrame([1, 2, 3]));
    agent.guest.write(encodeFrame({ op: 'list' }));
    agent.guest.write(encodeFrame({ id: 'seven', op: 'list' }));
    agent.guest.write(encodeFrame({ id: 9001, op: 'launch' }));
    agent.guest.write(encodeFrame({ id: 9002, op: 'stat' }));
    agent.guest.write(encodeFrame({ id: 9003, op: 'start', cmd: 5, args: [], envs: {}, stdin: false }));
    agent.guest.write(encodeFrame({ id: 9004, op: 'input', pid: 1 }));
    agent.guest.write(encodeFrame({ id: 9005, op: 'read', path: 'x', offset: -1, length: 1 }));
    for (const id of [9001, 9002, 9003, 9005]) assert.equal((await agent.reply(id)).error?.code, 'invalid', `request ${id}`);
    // No process 1 of the agent's: that is looked at before the data.
    assert.equal((await agent.reply(9004)).error?.code, 'no_such_process');
    assert.equal((await agent.request({ op: 'list' })).error, undefined);
    // Only requests with an id were answered; nothing else came.
    assert.ok(agent.frames.every((frame) => typeof (frame as { id?: unknown }).id === 'number' || (frame as { event?: unknown }).event !== undefined));
  });
});

describe(`sandbox agent: files`, () => {
  let agent: AgentClient;
  const files = join(HOME, 'files');
  before(async () => {
    agent = await startAgent(sandboxAgentArgv(), HOME);
  });

  const entry = async (request: AgentRequest) => {
    const reply = await agent.request(request);
    assert.equal(reply.error, undefined, JSON.stringify(reply));
    return reply.entry as AgentEntry;
  };
  const code = async (request: AgentRequest | Record<string, unknown>) => (await agent.request(request)).error?.code;

  it('writes (creating parents), appends, stats and reads back, relative to $HOME', async () => {
    const written = await entry({ op: 'write', path: 'files/notes/a.txt', data: bytes('hello'), append: false });
    const path = join(files, 'notes', 'a.txt');
    await entry({ op: 'write', path, data: bytes(', world'), append: true });
    assert.equal(readFileSync(path, 'utf8'), 'hello, world');
    const stat = await entry({ op: 'stat', path: 'files/notes/a.txt' });
    const real = lstatSync(path);
    assert.deepEqual(stat, {
      name: 'a.txt',
      path,
      type: 'file',
      size: 12,
      mode: real.mode & 0o7777,
      permissions: '-rw-r--r--',
      owner: userInfo().username,
      group: stat.group,
      modified_ms: stat.modified_ms,
    });
    assert.ok(Math.abs(stat.modified_ms - real.mtimeMs) < 1);
    assert.equal(written.size, 5);
    const read = await agent.request({ op: 'read', path, offset: 7, length: 100 });
    assert.deepEqual([read, bytesOf(read)], [{ id: read.id, eof: true }, bytes('world')]);
    const middle = await agent.request({ op: 'read', path, offset: 0, length: 5 });
    assert.deepEqual([middle, bytesOf(middle)], [{ id: middle.id, eof: false }, bytes('hello')]);
  });

  it('maps errors to the contract codes', async () => {
    mkdirSync(files, { recursive: true });
    writeFileSync(join(files, 'plain'), 'x');
    assert.equal(await code({ op: 'stat', path: join(files, 'absent') }), 'not_found');
    assert.equal(await code({ op: 'read', path: join(files, 'absent'), offset: 0, length: 1 }), 'not_found');
    assert.equal(await code({ op: 'read', path: files, offset: 0, length: 1 }), 'is_a_directory');
    assert.equal(await code({ op: 'write', path: join(files, 'plain', 'below'), data: Buffer.alloc(0), append: false }), 'not_a_directory');
    // Its bytes missing after the JSON.
    assert.equal(await code({ op: 'write', path: join(files, 'x'), append: false }), 'invalid');
    assert.equal(await code({ op: 'mkdir', path: join(files, 'plain') }), 'exists');
    assert.equal(await code({ op: 'mkdir', path: join(files, 'plain', 'below') }), 'not_a_directory');
    assert.equal(await code({ op: 'move', source: join(files, 'absent'), destination: join(files, 'b') }), 'not_found');
    assert.equal(await code({ op: 'move', source: join(files, 'plain'), destination: join(files, 'plain', 'b') }), 'not_a_directory');
    assert.equal(await code({ op: 'remove', path: join(files, 'absent') }), 'not_found');
    assert.equal(await code({ op: 'list_dir', path: join(files, 'absent'), depth: 1 }), 'not_found');
    assert.equal(await code({ op: 'list_dir', path: join(files, 'plain'), depth: 1 }), 'not_a_directory');
    assert.equal(await code({ op: 'list_dir', path: files, depth: 0 }), 'invalid');
    // A FIFO would hold the agent until something opened its other end: only regular files are read and written.
    execFileSync('mkfifo', [join(files, 'fifo')]);
    assert.equal(await code({ op: 'read', path: join(files, 'fifo'), offset: 0, length: 1 }), 'not_regular');
    assert.equal(await code({ op: 'write', path: join(files, 'fifo'), data: Buffer.alloc(0), append: false }), 'not_regular');
    assert.equal(await code({ op: 'write', path: files, data: Buffer.alloc(0), append: false }), 'is_a_directory');
    assert.equal(await code({ op: 'read', path: '/dev/zero', offset: 0, length: 1 }), 'not_regular');
    // What the request names wrong is the caller's to fix, never the agent's failure.
    const tooLong = join(files, 'é'.repeat(256));
    for (const request of [
      { op: 'mkdir', path: tooLong },
      { op: 'stat', path: tooLong },
      { op: 'read', path: tooLong, offset: 0, length: 1 },
      { op: 'write', path: join(tooLong, 'below'), data: Buffer.alloc(0), append: false },
    ] as const) {
      assert.equal(await code(request), 'invalid', `${request.op} of a 512-byte name`);
    }
    symlinkSync('loop', join(files, 'loop'));
    assert.equal(await code({ op: 'read', path: join(files, 'loop'), offset: 0, length: 1 }), 'invalid');
    assert.equal(await code({ op: 'move', source: files, destination: join(files, 'inside') }), 'invalid');
  });

  it('makes directories with their parents, saying whether it made them', async () => {
    const made = await agent.request({ op: 'mkdir', path: 'files/made/deep' });
    assert.equal(made.created, true);
    assert.equal((made.entry as AgentEntry).type, 'directory');
    assert.equal((made.entry as AgentEntry).permissions, 'drwxr-xr-x');
    assert.equal((await agent.request({ op: 'mkdir', path: 'files/made/deep' })).created, false);
  });

  it('moves, making the destination parents', async () => {
    writeFileSync(join(files, 'to-move'), 'moving');
    const moved = await entry({ op: 'move', source: join(files, 'to-move'), destination: 'files/moved/deep/b.txt' });
    assert.equal(moved.path, join(files, 'moved', 'deep', 'b.txt'));
    assert.equal(readFileSync(moved.path, 'utf8'), 'moving');
    assert.equal(await code({ op: 'stat', path: join(files, 'to-move') }), 'not_found');
  });

  it('lists a directory to a depth, links listed as links and never entered', async () => {
    const tree = join(scratch, 'tree');
    mkdirSync(join(tree, 'sub', 'deeper'), { recursive: true });
    writeFileSync(join(tree, 'f1'), '1');
    writeFileSync(join(tree, 'sub', 'f2'), '22');
    symlinkSync(join(tree, 'sub'), join(tree, 'link'));
    const names = async (depth: number) => {
      const reply = await agent.request({ op: 'list_dir', path: tree, depth });
      return (reply.entries as AgentEntry[]).map((listed) => listed.path.slice(tree.length + 1));
    };
    assert.deepEqual(await names(1), ['f1', 'link', 'sub']);
    assert.deepEqual(await names(2), ['f1', 'link', 'sub', 'sub/deeper', 'sub/f2']);
    const { entries } = (await agent.request({ op: 'list_dir', path: tree, depth: 1 })) as { entries: AgentEntry[] };
    const link = entries.find((listed) => listed.name === 'link')!;
    assert.equal(link.type, 'symlink');
    assert.equal(link.symlink_target, join(tree, 'sub'));
    assert.equal(link.permissions[0], 'l');
    assert.equal(entries.find((listed) => listed.name === 'f1')!.size, 1);
  });

  it("keeps a file's metadata as user.e2b.* extended attributes: a write sets them all, one without clears them, an append keeps them", async () => {
    const path = join(files, 'tagged.txt');
    const tagged = await entry({ op: 'write', path, data: bytes('a'), append: false, metadata: { author: 'mish', purpose: 'upload' } });
    assert.deepEqual(tagged.metadata, { author: 'mish', purpose: 'upload' });
    await entry({ op: 'write', path, data: bytes('b'), append: true });
    // Set beside the agent, as a process in the sandbox would: it shows too.
    execFileSync('/usr/bin/python3', ['-c', 'import os, sys; os.setxattr(sys.argv[1], "user.e2b.extra", b"x")', path]);
    assert.deepEqual((await entry({ op: 'stat', path })).metadata, { author: 'mish', purpose: 'upload', extra: 'x' });
    const renamed = await entry({ op: 'move', source: path, destination: join(files, 'renamed-tagged.txt') });
    assert.deepEqual(renamed.metadata, { author: 'mish', purpose: 'upload', extra: 'x' });
    const cleared = await entry({ op: 'write', path: join(files, 'renamed-tagged.txt'), data: bytes('c'), append: false });
    assert.equal(cleared.metadata, undefined);
    assert.equal(await code({ op: 'write', path, data: Buffer.alloc(0), append: false, metadata: { 'bad\nkey': 'v' } }), 'invalid');
  });

  it("says where a link leads as an absolute path, as envd does: its chain's end, or its own target when that is gone", async () => {
    const links = join(scratch, 'links');
    mkdirSync(links, { recursive: true });
    writeFileSync(join(links, 'file.txt'), 'x');
    symlinkSync('file.txt', join(links, 'relative'));
    symlinkSync('relative', join(links, 'chained'));
    symlinkSync('../missing', join(links, 'dangling'));
    const targetOf = async (name: string) => ((await agent.request({ op: 'stat', path: join(links, name) })).entry as AgentEntry).symlink_target;
    assert.equal(await targetOf('relative'), join(links, 'file.txt'));
    assert.equal(await targetOf('chained'), join(links, 'file.txt'));
    assert.equal(await targetOf('dangling'), join(scratch, 'missing'));
  });

  it('refuses a listing whose answer would pass the frame limit (too_large), and answers the next request', async () => {
    // Each link's target, as JSON, is 12 bytes a character: 3,000 of them pass 32 MiB.
    const huge = join(scratch, 'huge-listing');
    mkdirSync(huge);
    const target = '\u{1F600}'.repeat(1000);
    for (let index = 0; index < 3000; index++) symlinkSync(target, join(huge, `link-${index}`));
    assert.equal(await code({ op: 'list_dir', path: huge, depth: 1 }), 'too_large');
    assert.equal((await agent.request({ op: 'stat', path: huge })).entry !== undefined, true);
  });

  it('removes a file, a link (not what it points to) and a directory tree (not what its links point to)', async () => {
    const outside = join(scratch, 'outside');
    mkdirSync(outside, { recursive: true });
    writeFileSync(join(outside, 'keep'), 'keep');
    const doomed = join(scratch, 'doomed');
    mkdirSync(join(doomed, 'inner'), { recursive: true });
    writeFileSync(join(doomed, 'inner', 'file'), 'x');
    symlinkSync(outside, join(doomed, 'inner', 'out'));
    symlinkSync(outside, join(scratch, 'link-to-outside'));
    writeFileSync(join(scratch, 'single'), 'x');

    assert.equal((await agent.request({ op: 'remove', path: join(scratch, 'link-to-outside') })).error, undefined);
    assert.equal((await agent.request({ op: 'remove', path: join(scratch, 'single') })).error, undefined);
    assert.equal((await agent.request({ op: 'remove', path: doomed })).error, undefined);
    for (const gone of ['link-to-outside', 'single', 'doomed']) assert.equal(await code({ op: 'stat', path: join(scratch, gone) }), 'not_found');
    assert.equal(readFileSync(join(outside, 'keep'), 'utf8'), 'keep');
  });

  it('writes and reads a 3 MiB file in chunks that reassemble it', async () => {
    const content = randomBytes(3 << 20);
    const chunk = 1 << 20;
    const path = 'files/big.bin';
    for (let offset = 0; offset < content.length; offset += chunk) {
      await entry({ op: 'write', path, data: bytes(content.subarray(offset, offset + chunk)), append: offset > 0 });
    }
    const parts: Buffer[] = [];
    for (let offset = 0, eof = false; !eof;) {
      const reply = (await agent.request({ op: 'read', path, offset, length: chunk })) as { eof: boolean };
      const part = bytesOf(reply)!;
      parts.push(part);
      offset += part.length;
      eof = reply.eof;
    }
    assert.equal(parts.length, 3);
    assert.ok(Buffer.concat(parts).equals(content));
    assert.ok(readFileSync(join(files, 'big.bin')).equals(content));
  });
});

describe(`sandbox agent: watches`, () => {
  let agent: AgentClient;
  before(async () => {
    agent = await startAgent(sandboxAgentArgv(), HOME);
  });

  const fsEvent =
    (watch: number) =>
    (event: AgentEvent): event is AgentFsEvent =>
      event.event === 'fs' && event.watch === watch;
  const nextChange = async (watch: number) => {
    const { name, type } = await agent.event(fsEvent(watch), `a change under watch ${watch}`);
    return `${type} ${name}`;
  };

  it('follows a tree recursively, into a directory made after the watch', async () => {
    const root = join(scratch, 'watched');
    mkdirSync(root);
    const { watch } = (await agent.request({ op: 'watch', path: root, recursive: true })) as { watch: number };
    mkdirSync(join(root, 'sub'));
    // The agent watches a new directory before it reports it: after this event, changes in it are seen.
    assert.equal(await nextChange(watch), 'create sub');
    writeFileSync(join(root, 'sub', 'file.txt'), 'x');
    assert.equal(await nextChange(watch), 'create sub/file.txt');
    assert.equal(await nextChange(watch), 'write sub/file.txt');
    chmodSync(join(root, 'sub', 'file.txt'), 0o600);
    assert.equal(await nextChange(watch), 'chmod sub/file.txt');
    renameSync(join(root, 'sub', 'file.txt'), join(root, 'sub', 'renamed.txt'));
    assert.equal(await nextChange(watch), 'rename sub/file.txt');
    assert.equal(await nextChange(watch), 'create sub/renamed.txt');
    unlinkSync(join(root, 'sub', 'renamed.txt'));
    assert.equal(await nextChange(watch), 'remove sub/renamed.txt');

    // Unwatched, it says nothing more: a change there comes before one under a second watch
    // in the agent's one inotify queue, so had it been reported, it would be seen first.
    assert.equal((await agent.request({ op: 'unwatch', watch })).error, undefined);
    writeFileSync(join(root, 'sub', 'after-unwatch'), 'x');
    const other = join(scratch, 'watched-flat');
    mkdirSync(other);
    const { watch: flat } = (await agent.request({ op: 'watch', path: other, recursive: false })) as { watch: number };
    mkdirSync(join(other, 'sub'));
    assert.equal(await nextChange(flat), 'create sub');
    // Not recursive: a change in a subdirectory is not reported, the next one at the top is.
    writeFileSync(join(other, 'sub', 'unseen'), 'x');
    writeFileSync(join(other, 'seen'), '');
    assert.equal(await nextChange(flat), 'create seen');
    assert.ok(
      !agent.frames.some((frame) => (frame as AgentFsEvent).event === 'fs' && (frame as AgentFsEvent).watch === watch && (frame as AgentFsEvent).name === 'sub/after-unwatch'),
    );
  });

  it('reports what a new directory already held when its watch was added (made with it)', async () => {
    const root = join(scratch, 'watched-made-whole');
    mkdirSync(root);
    const { watch } = (await agent.request({ op: 'watch', path: root, recursive: true })) as { watch: number };
    // One write makes the parents and the file before the agent reads the directory's event.
    assert.equal((await agent.request({ op: 'write', path: join(root, 'a', 'b', 'file.txt'), data: bytes(Buffer.from('x')), append: false })).error, undefined);
    const seen = new Set<string>();
    for (const expected of ['create a', 'create a/b', 'create a/b/file.txt']) {
      while (!seen.has(expected)) seen.add(await nextChange(watch));
    }
  });

  it('refuses a watch on a missing path or a file, and an unknown unwatch', async () => {
    assert.equal((await agent.request({ op: 'watch', path: join(scratch, 'absent'), recursive: true })).error?.code, 'not_found');
    writeFileSync(join(scratch, 'a-file'), '');
    assert.equal((await agent.request({ op: 'watch', path: join(scratch, 'a-file'), recursive: false })).error?.code, 'not_a_directory');
    assert.equal((await agent.request({ op: 'unwatch', watch: 999 })).error?.code, 'not_found');
  });
});

describe(`sandbox agent: end of input`, () => {
  it('ends every process it started, then itself, when its stdin ends', async () => {
    const agent = await startAgent(sandboxAgentArgv(), HOME);
    const sleeper = await agent.start({ cmd: 'sleep', args: ['1000'], envs: {}, stdin: true });
    const tree = await agent.start({ cmd: '/bin/sh', args: TREE_WITH_OWN_SESSION, envs: {}, stdin: false });
    const grandchild = Number((await agent.waitForOutput(tree, /^(\d+)\n/))[1]);
    agent.guest.endInput();
    assert.equal(await agent.guest.exited, 0);
    for (const pid of [sleeper, tree, grandchild]) await waitUntil(() => isGone(pid), `process ${pid} gone`);
  });
});
