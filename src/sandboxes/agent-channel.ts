import { PassThrough, type Readable } from 'node:stream';
import {
  AGENT_OUTPUT_CHUNK_BYTES,
  AGENT_RAW_BYTES_VERSION,
  DEFAULT_OUTPUT_WINDOW_BYTES,
  AgentEventSchema,
  AgentFailureSchema,
  AgentReadySchema,
  AgentReplySchemas,
  type AgentEvent,
  type AgentFsEvent,
  type AgentOutputEvent,
  type AgentReplyOf,
  type AgentRequest,
  type AgentRequestOf,
} from '../contract/sandbox-agent.js';
import { validate } from '../contract/validate.js';
import { CappedCapture } from '../isolation/output-capture.js';
import type { OutputSink } from '../isolation/types.js';
import { encodeFrame, encodeFrameParts, FrameDecoder } from '../wire/frame-codec.js';
import { AgentOperationError, SandboxGoneError, type ProcessListener, type SandboxAgentPort, type StartingOp } from './agent-port.js';

/**
 * The largest frame read from an agent. Its honest frames are far smaller (an output event holds
 * 64 KiB, a read chunk READ_CHUNK_BYTES); a listing of a huge tree is the one that grows, and
 * past this it ends the sandbox rather than the host's memory.
 */
const MAX_AGENT_FRAME_BYTES = 64 * 1024 * 1024;
/**
 * Request bytes the host holds for an agent that has not read them. The agent runs as the
 * sandbox's user, so the code in the sandbox can stop it (SIGSTOP): past this, requests are
 * refused (busy) rather than queued in the worker's memory.
 */
const MAX_UNSENT_BYTES = 64 * 1024 * 1024;
/** What the agent says on its own stderr (a crash at start-up) is kept for the reason it ended. */
const AGENT_STDERR_BYTES = 16 * 1024;
/**
 * Heartbeats an agent may stay silent while it owes an answer before it is taken for wedged.
 * Its loop answers between requests, so only one request that blocks it (a remove of a huge
 * tree, a write to a stalled disk) or a stopped, starved or dead agent keeps it silent this long.
 */
const SILENT_HEARTBEATS = 4;

/** A channel held for a checkpoint (AgentChannel.hold). */
export interface AgentHold {
  /** The holder's way to the agent: its requests still go through. */
  port: SandboxAgentPort;
  /** Resolves once no reply is owed. */
  drained(): Promise<void>;
  /** Lets everyone's requests in again. */
  release(): void;
}

/**
 * A process's output on its way: what the agent sent and the listeners still hold (`held`), and
 * what they let go of that the agent has not been told yet (`owed`), of its `window`.
 */
type OutputFlow = { held: number; owed: number; window: number };

/** A request waiting for its reply; one that starts a process (or a connection) has its listener and output window. */
type Pending = { op: AgentRequest['op']; resolve(reply: unknown): void; reject(error: Error): void; listener?: ProcessListener; window?: number };

/**
 * The host's end of a sandbox agent's pipes (contract/sandbox-agent.ts): requests framed onto its
 * stdin, replies matched by id, events handed to whoever follows the process or watch. Requests
 * may overlap (a process runs while files are read). A message that is not the protocol, or that
 * fails its schema, ends the channel: the agent shares its sandbox with the code it runs, and a
 * sandbox whose agent cannot be believed is over.
 */
export class AgentChannel implements SandboxAgentPort {
  readonly stdin: Readable;
  readonly stdout: OutputSink = { write: (chunk) => this.receive(chunk) };
  readonly stderr = new CappedCapture(AGENT_STDERR_BYTES);
  private readonly input = new PassThrough();
  private readonly decoder = new FrameDecoder(MAX_AGENT_FRAME_BYTES, true);
  /** Whether the agent takes bytes raw after a request's JSON (protocol AGENT_RAW_BYTES_VERSION on), or as base64: as it says. */
  private rawBytes: boolean;
  private readonly pending = new Map<number, Pending>();
  private readonly processes = new Map<number, Set<ProcessListener>>();
  private readonly watches = new Map<number, Set<(event: AgentFsEvent) => void>>();
  private readonly flows = new Map<number, OutputFlow>();
  /** Processes whose credit was refused (busy): sent again once the agent reads its stdin. */
  private readonly creditsOnDrain = new Set<number>();
  private nextId = 1;
  private gone: SandboxGoneError | null = null;
  private readyWaiter: { resolve(version: string): void; reject(error: Error): void } | null = null;
  private readonly ready: Promise<string>;
  /** Set while a checkpoint is prepared (hold): others' requests are refused, and `drained` is told when none is pending. */
  private held: { reason: string; drained: () => void } | null = null;
  /**
   * Processes the holder of a hold started (a pause's home packer): their output is credited
   * while the channel is held, or a packer with more than a window to say would wait forever.
   * Their credits are answered before the checkpoint, which waits until nothing is owed.
   */
  private readonly holderPids = new Set<number>();
  /** When the agent last said anything, and since when it owes an answer (the first request of those pending was sent). */
  private lastHeard = performance.now();
  /** When it was last asked anything or said anything of its own (an event): not a ping, nor its answer. */
  private lastActive = performance.now();
  private owedSince = 0;
  /** Set while its sandbox is frozen (frozenUntil): what the next request calls first, and that call while it runs. */
  private frozen: { thaw: () => Promise<void>; thawing: Promise<void> | null } | null = null;
  private heartbeat: NodeJS.Timeout | undefined;
  /** Told once, with why, when the agent is taken for broken (its protocol, its silence): the sandbox is over. */
  private onBroken: ((reason: string) => void) | undefined;

  /**
   * `resumedVersion`: an agent restored from a checkpoint, which said it was ready before (and
   * says it no more). `outputWindowBytes`: how much of a process's output may be held here
   * (by listeners whose clients do not read) before the agent stops reading that process.
   */
  constructor(
    resumedVersion?: string,
    private readonly outputWindowBytes = DEFAULT_OUTPUT_WINDOW_BYTES,
  ) {
    this.stdin = this.input;
    // An agent started now is this host's own; one restored speaks the protocol it was saved with.
    this.rawBytes = resumedVersion === undefined || speaksRawBytes(resumedVersion);
    this.ready = new Promise((resolve, reject) => (this.readyWaiter = { resolve, reject }));
    // Whoever starts the sandbox awaits `started()`; an unawaited rejection must not crash the host.
    this.ready.catch(() => undefined);
    if (resumedVersion !== undefined) {
      this.readyWaiter!.resolve(resumedVersion);
      this.readyWaiter = null;
    }
  }

  /**
   * Before a checkpoint: from now on only the holder's requests (`port`) are sent; everyone
   * else's are refused (busy, saying `reason`), so nothing reaches the agent that the state about
   * to be kept would miss. `drained` resolves once no reply is owed, so the agent saved owes none
   * (a reply to a request of this channel would reach the next one, which never asked).
   * `release` lets everyone in again (a checkpoint that failed).
   */
  hold(reason: string): AgentHold {
    const held = { reason, drained: () => undefined as void };
    this.held = held;
    // Inputs held back by the agent (their processes have not read them) are owed too: it
    // answers them now, so that the agent saved owes none.
    if ([...this.pending.values()].some((waiter) => waiter.op === 'input')) this.send({ op: 'release_input' }, undefined, true).catch(() => undefined);
    const port: SandboxAgentPort = {
      request: (request) => this.send(request, undefined, true) as never,
      start: (request, listener) => this.startAs(request, listener, true),
      follow: (pid, listener) => this.follow(pid, listener),
      onWatch: (watch, listener) => this.onWatch(watch, listener),
    };
    return {
      port,
      drained: () =>
        new Promise<void>((resolve) => {
          held.drained = resolve;
          if (this.pending.size === 0 || this.gone) resolve();
        }),
      release: () => {
        if (this.held !== held) return;
        this.held = null;
        for (const pid of this.flows.keys()) this.sendCredit(pid);
      },
    };
  }

  /**
   * Watches the agent from now on: after `heartbeatMs` of silence it is pinged, and an agent
   * that owes an answer (a ping's, or anyone's) and says nothing for SILENT_HEARTBEATS
   * heartbeats is wedged (stopped, dead without its pipes closing, its runtime frozen). That,
   * or a message out of protocol, is told to `onBroken` with the reason, and the channel is lost.
   * No ping is sent while the channel is held: nothing may be owed across a checkpoint (the
   * holder's own requests are still watched, and the checkpoint has its deadline).
   */
  watch(heartbeatMs: number, onBroken: (reason: string) => void): void {
    this.onBroken = onBroken;
    clearInterval(this.heartbeat);
    this.heartbeat = setInterval(() => this.beat(heartbeatMs), heartbeatMs);
    this.heartbeat.unref();
  }

  private beat(heartbeatMs: number): void {
    // Frozen, it says nothing and owes nothing: its silence is no sign.
    if (this.frozen) return;
    const now = performance.now();
    const owed = this.promptlyOwed();
    if (owed > 0) {
      const silentMs = now - Math.max(this.lastHeard, this.owedSince);
      if (silentMs >= SILENT_HEARTBEATS * heartbeatMs) this.broken(`its agent owed ${owed} answer(s) and said nothing for ${Math.round(silentMs / 1000)} s`);
    } else if (!this.held && now - this.lastHeard >= heartbeatMs) {
      // Refused (busy: the agent has not read what it was sent) it is owed nothing; what is unread is.
      this.send({ op: 'ping' }).catch(() => undefined);
    }
  }

  /**
   * The answers the agent owes at once. An `input` is answered only once its process has read
   * what the agent holds down to a window (agent/processes.go inputWindow), which a process that
   * reads nothing for a minute may never do: its silence is not the agent's.
   */
  private promptlyOwed(): number {
    let owed = 0;
    for (const waiter of this.pending.values()) if (waiter.op !== 'input') owed += 1;
    return owed;
  }

  /** The agent cannot be believed or reached any more: the sandbox is told, then the channel is lost. */
  private broken(reason: string): void {
    if (this.gone) return;
    this.onBroken?.(reason);
    this.lose(reason);
  }

  /** The agent's version, once it serves requests. */
  started(): Promise<string> {
    return this.ready;
  }

  request<Op extends Exclude<AgentRequest['op'], StartingOp>>(request: AgentRequestOf<Op>): Promise<AgentReplyOf<Op>> {
    return this.send(request) as Promise<AgentReplyOf<Op>>;
  }

  start(request: AgentRequestOf<StartingOp>, listener: ProcessListener): Promise<{ pid: number; detach(): void }> {
    return this.startAs(request, listener, false);
  }

  private async startAs(request: AgentRequestOf<StartingOp>, listener: ProcessListener, holder: boolean): Promise<{ pid: number; detach(): void }> {
    const { pid } = (await this.send({ output_window: this.outputWindowBytes, ...request } as AgentRequest, listener, holder)) as AgentReplyOf<'start'>;
    if (holder) this.holderPids.add(pid);
    return { pid, detach: () => this.processes.get(pid)?.delete(listener) };
  }

  /**
   * Processes this channel did not start but the agent runs (a restored one's): they can be
   * followed. Each is credited a whole window: what the channel before held is gone with it,
   * and the agent never lets a process more than a window ahead.
   */
  adopt(pids: readonly number[]): void {
    for (const pid of pids) {
      if (!this.processes.has(pid)) this.processes.set(pid, new Set());
      this.flowOf(pid, this.outputWindowBytes).owed = this.outputWindowBytes;
      this.sendCredit(pid);
    }
  }

  follow(pid: number, listener: ProcessListener): { detach(): void } {
    if (this.gone) throw this.gone;
    const listeners = this.processes.get(pid);
    if (!listeners) throw new AgentOperationError({ code: 'no_such_process', message: `no process ${pid} is running` });
    listeners.add(listener);
    return { detach: () => listeners.delete(listener) };
  }

  onWatch(watch: number, listener: (event: AgentFsEvent) => void): { detach(): void } {
    if (this.gone) throw this.gone;
    let listeners = this.watches.get(watch);
    if (!listeners) this.watches.set(watch, (listeners = new Set()));
    listeners.add(listener);
    return { detach: () => listeners.delete(listener) };
  }

  /** The sandbox is over: every pending and later request fails with `reason`, the agent's stdin ends. */
  lose(reason: string): void {
    if (this.gone) return;
    this.gone = new SandboxGoneError(reason);
    clearInterval(this.heartbeat);
    this.readyWaiter?.reject(this.gone);
    for (const waiter of this.pending.values()) waiter.reject(this.gone);
    this.pending.clear();
    this.held?.drained();
    for (const listeners of this.processes.values()) for (const listener of listeners) listener.lost?.(this.gone);
    this.processes.clear();
    this.flows.clear();
    this.holderPids.clear();
    this.watches.clear();
    this.input.end();
  }

  /**
   * Its sandbox's processes, the agent among them, are frozen (an idle sandbox, Sandboxes): the
   * next request first calls `thaw` (once for all the requests that come meanwhile), then goes.
   */
  frozenUntil(thaw: () => Promise<void>): void {
    this.frozen = { thaw, thawing: null };
  }

  /** Whether an answer is owed by the agent (a request of anyone's waits for it). */
  get owes(): boolean {
    return this.pending.size > 0;
  }

  /** Whether a client waits on the agent: a process's output or end followed, a watch. */
  get followed(): boolean {
    return this.watches.size > 0 || [...this.processes.values()].some((listeners) => [...listeners].some((listener) => listener.following?.() ?? true));
  }

  /** How long nothing was asked of the agent and it said nothing of its own (pings aside). */
  get quietForMs(): number {
    return performance.now() - this.lastActive;
  }

  /**
   * Resolves once the sandbox may be used without its agent (the host's own way to its ports):
   * refused as a request would be while it is held or gone, thawed first where it is frozen,
   * and counted as a use of it.
   */
  awake(): Promise<void> {
    if (this.gone) return Promise.reject(this.gone);
    if (this.held) return Promise.reject(new AgentOperationError({ code: 'busy', message: this.held.reason }));
    this.lastActive = performance.now();
    return this.thawed() ?? Promise.resolve();
  }

  /** Where its sandbox is frozen, its thaw (one for every request that comes meanwhile); null otherwise. */
  private thawed(): Promise<void> | null {
    const frozen = this.frozen;
    if (!frozen) return null;
    frozen.thawing ??= frozen.thaw().then(
      () => {
        if (this.frozen === frozen) this.frozen = null;
        // Its silence while frozen counts for nothing.
        this.lastHeard = performance.now();
      },
      (error: Error) => {
        this.broken(`its processes could not be thawed: ${error.message}`);
        throw error;
      },
    );
    return frozen.thawing;
  }

  private send(request: AgentRequest, listener?: ProcessListener, holder = false): Promise<unknown> {
    if (this.gone) return Promise.reject(this.gone);
    if (this.held && !holder) return Promise.reject(new AgentOperationError({ code: 'busy', message: this.held.reason }));
    if (request.op !== 'ping') this.lastActive = performance.now();
    const thawing = this.thawed();
    if (thawing) return thawing.then(() => this.send(request, listener, holder));
    if (this.input.writableLength > MAX_UNSENT_BYTES) {
      const message = `the sandbox's agent has not read the last ${this.input.writableLength} bytes sent to it`;
      return Promise.reject(new AgentOperationError({ code: 'busy', message }));
    }
    const id = this.nextId++;
    if (request.op !== 'input' && this.promptlyOwed() === 0) this.owedSince = performance.now();
    return new Promise((resolve, reject) => {
      const window = 'output_window' in request ? request.output_window : undefined;
      this.pending.set(id, { op: request.op, resolve, reject, ...(listener ? { listener } : {}), ...(window !== undefined && { window }) });
      for (const part of this.frameOf({ ...request, id })) this.input.write(part);
    });
  }

  /** A request's frame in parts, its bytes (an input's, a write's) raw after the JSON or base64 in it, as the agent speaks. */
  private frameOf(request: AgentRequest & { id: number }): Uint8Array[] {
    if (!('data' in request)) return [encodeFrame(request, MAX_AGENT_FRAME_BYTES)];
    const { data, ...fields } = request;
    if (this.rawBytes) return encodeFrameParts(fields, MAX_AGENT_FRAME_BYTES, data);
    return [encodeFrame({ ...fields, data: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64') }, MAX_AGENT_FRAME_BYTES)];
  }

  private receive(chunk: Buffer): void {
    if (this.gone) return;
    this.lastHeard = performance.now();
    try {
      this.decoder.push(chunk, (message, bytes) => this.dispatch(message, bytes));
    } catch (error) {
      this.broken(`the sandbox's agent broke its protocol: ${(error as Error).message}`);
    }
  }

  private dispatch(message: unknown, bytes: Buffer | undefined): void {
    if (this.gone) return;
    const fields = (message !== null && typeof message === 'object' ? message : {}) as { id?: unknown; event?: unknown; ready?: unknown };
    if (fields.ready !== undefined) return this.readied(message);
    if (fields.event !== undefined) return this.event(message, bytes);
    const waiter = typeof fields.id === 'number' ? this.pending.get(fields.id) : undefined;
    if (!waiter) throw new Error(`a reply nobody asked for (id ${String(fields.id)})`);
    this.pending.delete(fields.id as number);
    if (this.pending.size === 0) this.held?.drained();
    const failure = validate(AgentFailureSchema, message);
    if (failure.ok) return waiter.reject(new AgentOperationError(failure.value.error));
    const reply = validate(AgentReplySchemas[waiter.op], message);
    if (!reply.ok) throw new Error(`its answer to ${waiter.op}: ${reply.message}`);
    if (waiter.op === 'read') withBytes(reply.value as { data?: unknown }, bytes, 'its answer to read');
    // Attached, its window known, before the next frame is read: the agent sends a process's first event after this reply.
    if ((waiter.op === 'start' || waiter.op === 'connect') && waiter.listener) {
      const { pid } = reply.value as AgentReplyOf<'start'>;
      this.processes.set(pid, new Set([waiter.listener]));
      this.flowOf(pid, waiter.window ?? this.outputWindowBytes);
    }
    waiter.resolve(reply.value);
  }

  private readied(message: unknown): void {
    const ready = validate(AgentReadySchema, message);
    if (!ready.ok || this.readyWaiter === null) throw new Error(`an unexpected ready message (${ready.ok ? 'a second one' : ready.message})`);
    // Its own word, not the build's: an agent program older than this host would drop raw bytes.
    this.rawBytes = speaksRawBytes(ready.value.version);
    this.readyWaiter.resolve(ready.value.version);
    this.readyWaiter = null;
  }

  private event(message: unknown, bytes: Buffer | undefined): void {
    const checked = validate(AgentEventSchema, message);
    if (!checked.ok) throw new Error(`an event out of protocol: ${checked.message}`);
    this.lastActive = performance.now();
    if (checked.value.event === 'output') withBytes(checked.value, bytes, 'an output event');
    const event = checked.value as AgentEvent;
    if (event.event === 'fs') {
      for (const listener of this.watches.get(event.watch) ?? []) listener(event);
      return;
    }
    if (event.event === 'output') return this.output(event);
    this.flows.delete(event.pid);
    this.holderPids.delete(event.pid);
    const listeners = this.processes.get(event.pid);
    if (!listeners) return;
    this.processes.delete(event.pid);
    for (const listener of listeners) listener.end(event);
  }

  /**
   * Output goes to every listener; once none holds it any more, the agent is credited for it. An
   * agent that sends more than a window (and the chunk that may pass it) while it is held here
   * has left the protocol: that is what bounds what a process's unread output costs the host.
   */
  private output(event: AgentOutputEvent): void {
    // Output of a process it never started (or that ended) would grow the flows without bound.
    if (!this.processes.has(event.pid)) throw new Error(`output of process ${event.pid}, which it is not running`);
    const bytes = event.data.length;
    const flow = this.flowOf(event.pid, this.outputWindowBytes);
    flow.held += bytes;
    if (flow.held > flow.window + AGENT_OUTPUT_CHUNK_BYTES) {
      throw new Error(`process ${event.pid} sent ${flow.held} bytes of output past its window of ${flow.window}`);
    }
    const holding: Array<Promise<void>> = [];
    for (const listener of this.processes.get(event.pid) ?? []) {
      const taken = listener.output(event);
      if (taken) holding.push(taken);
    }
    const release = () => {
      flow.held -= bytes;
      flow.owed += bytes;
      // A credit per quarter window, not per event: the agent stops only when a whole window is held.
      if (flow.owed >= flow.window / 4) this.sendCredit(event.pid);
    };
    if (holding.length === 0) release();
    else void Promise.allSettled(holding).then(release);
  }

  /** The flow of a process's output; `window` is its window when it has none yet. */
  private flowOf(pid: number, window: number): OutputFlow {
    let flow = this.flows.get(pid);
    if (!flow) this.flows.set(pid, (flow = { held: 0, owed: 0, window }));
    return flow;
  }

  /**
   * Tells the agent what was let go of a process's output. Not while held, but to the holder's own
   * processes: nothing else may be owed a reply across a checkpoint (release sends it).
   */
  private sendCredit(pid: number): void {
    const flow = this.flows.get(pid);
    if (!flow || flow.owed === 0 || (this.held && !this.holderPids.has(pid)) || this.gone) return;
    const bytes = flow.owed;
    flow.owed = 0;
    // A process that ended meanwhile is credited all the same (the agent ignores it); a sandbox that ended has nothing to credit.
    // Refused (the agent reads nothing: busy), it is owed still, and sent once the agent reads
    // again: an agent that waits for it sends no more output to carry it.
    this.send({ op: 'credit', pid, bytes }, undefined, true).catch(() => {
      flow.owed += bytes;
      this.creditWhenRead(pid);
    });
  }

  /** Sends a process's refused credit again once the agent has read what it was sent (its stdin drained). */
  private creditWhenRead(pid: number): void {
    if (this.gone) return;
    if (this.creditsOnDrain.size === 0) {
      this.input.once('drain', () => {
        const pids = [...this.creditsOnDrain];
        this.creditsOnDrain.clear();
        for (const each of pids) this.sendCredit(each);
      });
    }
    this.creditsOnDrain.add(pid);
  }
}

/** Whether an agent of `version` (its protocol) takes bytes raw after a message's JSON. */
function speaksRawBytes(version: string): boolean {
  return Number(version) >= AGENT_RAW_BYTES_VERSION;
}

/**
 * Puts a message's bytes in its `data` as a Buffer (WithBytes): those after its JSON, copied, or
 * its base64 `data` (a protocol 1 agent). A message that has neither, or both, is out of protocol.
 * Copied: they are a view of the frame, which the agent may have padded with megabytes of JSON
 * whitespace; kept by a slow client, the view would hold the whole frame while counting one byte.
 */
function withBytes(message: { data?: unknown }, bytes: Buffer | undefined, what: string): void {
  if ((bytes === undefined) === (message.data === undefined)) throw new Error(`${what} has ${bytes === undefined ? 'no bytes' : 'its bytes twice'}`);
  message.data = bytes ? Buffer.from(bytes) : Buffer.from(message.data as string, 'base64');
}
