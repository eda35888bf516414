import type { Static, TSchema } from '@sinclair/typebox';
import { BridgeMessageSchema, BridgeReadySchema, type BridgeRequest, type OutputLine } from '../contract/code-interpreter.js';
import type { AgentEndEvent, AgentOutputEvent } from '../contract/sandbox-agent.js';
import { validate } from '../contract/validate.js';
import type { ProcessListener, SandboxAgentPort } from '../sandboxes/agent-port.js';
import { CappedCapture } from '../isolation/output-capture.js';
import { encodeFrame, FrameDecoder } from '../wire/frame-codec.js';
import { guestProgram } from '../util/guest-program.js';

/**
 * The largest frame read from a bridge: its honest ones hold one output line, a result at most
 * 16 MiB of JSON (the bridge cuts a larger one: python/bridge-lines.py); a larger frame ends the context.
 */
const MAX_BRIDGE_FRAME_BYTES = 24 * 1024 * 1024;
/** What the bridge says on its stderr (a kernel that would not start) is kept for the reason it ended. */
const BRIDGE_STDERR_BYTES = 16 * 1024;

const bridgeSource = guestProgram(new URL('./python/kernel-bridge.py', import.meta.url));
/** The bridge's parts, in the order its PARTS loads them from its argv (before the language). */
const bridgePartSources = [guestProgram(new URL('./python/bridge-lines.py', import.meta.url)), guestProgram(new URL('./python/bridge-kernels.py', import.meta.url))];
const chartsSource = guestProgram(new URL('./python/charts.py', import.meta.url));
const startupSource = guestProgram(new URL('./python/startup.py', import.meta.url));
const nodeKernelSource = guestProgram(new URL('./node/kernel-node.cjs', import.meta.url));
const pythonKernelSource = guestProgram(new URL('./python/kernel-python.py', import.meta.url));
const javaKernelSource = guestProgram(new URL('./java/JavaKernel.java', import.meta.url));
const rKernelSource = guestProgram(new URL('./r/kernel-r.R', import.meta.url));

/** The languages a bridge runs a kernel for, and the programs it is given for each (its argv after the language). */
const KERNEL_SOURCES = {
  python: () => [chartsSource(), startupSource(), pythonKernelSource()],
  javascript: () => [nodeKernelSource()],
  bash: () => [],
  java: () => [javaKernelSource()],
  r: () => [rKernelSource()],
} as const satisfies Record<string, () => string[]>;
export type KernelLanguage = keyof typeof KERNEL_SOURCES;

/** The context's kernel is gone (it ended, broke the protocol, or its sandbox ended: `sandboxEnded`). */
export class BridgeLost extends Error {
  constructor(
    message: string,
    readonly sandboxEnded = false,
  ) {
    super(message);
    this.name = 'BridgeLost';
  }
}

export interface BridgeStart {
  agent: SandboxAgentPort;
  /** The sandbox's python: the bridge and its kernel run on it. */
  python: string;
  /** Where the bridge starts. */
  cwd: string;
  /**
   * The directory the kernel works in, entered by the bridge itself: one the sandbox's user
   * cannot enter (a missing one, or /root) leaves it in `cwd`, which its first cell is told on
   * stderr, as E2B's kernel stays where it was when its `%cd` fails.
   */
  workDir?: string;
  language: KernelLanguage;
  /** The node a javascript kernel runs on (a session's toolchain); the sandbox's `node` when not given. */
  node?: string;
}

type Waiter = { onOutput?: (line: OutputLine) => void; resolve(): void; reject(error: Error): void };

/**
 * The host's end of one context's kernel bridge (python/kernel-bridge.py), a process of the
 * sandbox started through its agent: requests framed onto its stdin, its stdout frames decoded,
 * each checked against the contract (contract/code-interpreter.ts) before it is believed. The
 * cells run in the kernel, another process, so nothing they print reaches these frames.
 */
export class KernelBridge {
  private readonly decoder = new FrameDecoder(MAX_BRIDGE_FRAME_BYTES);
  private readonly stderr = new CappedCapture(BRIDGE_STDERR_BYTES);
  private readonly waiters = new Map<number, Waiter>();
  private nextId = 1;
  private lost: BridgeLost | null = null;
  private pid = 0;
  private readyWaiter: { resolve(): void; reject(error: Error): void } | null = null;
  private readonly lostListeners: Array<(reason: BridgeLost) => void> = [];
  /** While its sandbox is kept with its memory: the end of the sandbox's channel is not its own. */
  private suspended = false;
  private readonly listener: ProcessListener = {
    output: (event) => this.received(event),
    end: (event) => this.ended(event),
    lost: (gone) => this.lose(gone.message, true),
  };

  private constructor(private agent: SandboxAgentPort) {}

  /** Starts the bridge and waits until its kernel answers (about half a second for IPython, a tenth for bash or node). */
  static async start({ agent, python, cwd, workDir, language, node }: BridgeStart): Promise<KernelBridge> {
    const bridge = new KernelBridge(agent);
    const ready = new Promise<void>((resolve, reject) => (bridge.readyWaiter = { resolve, reject }));
    const started = await agent.start(
      {
        op: 'start',
        cmd: python,
        args: [
          '-I',
          '-c',
          bridgeSource(),
          ...bridgePartSources.map((part) => part()),
          language,
          ...KERNEL_SOURCES[language](),
          ...(language === 'javascript' && node !== undefined ? [node] : []),
        ],
        envs: workDir === undefined ? {} : { AGENT_RUNNER_WORK_DIR: workDir },
        cwd,
        stdin: true,
      },
      bridge.listener,
    );
    bridge.pid = started.pid;
    try {
      await ready;
    } catch (error) {
      await bridge.stop();
      throw error;
    }
    return bridge;
  }

  /**
   * Its sandbox is being kept with its memory (a pause, a fork's parent): the kernel is kept with
   * it, so the end of the sandbox's channel does not end the bridge until resume() says.
   */
  suspend(): void {
    this.suspended = true;
  }

  /**
   * Its sandbox runs again (or never stopped, the keeping having failed): the kernel is followed
   * through `agent`, the running sandbox's, and cells waiting on it go on. Null: the sandbox will
   * not come back, and the bridge is lost.
   */
  resume(agent: SandboxAgentPort | null): void {
    this.suspended = false;
    if (agent === null) return this.lose('its sandbox was not kept');
    this.agent = agent;
    try {
      agent.follow(this.pid, this.listener);
    } catch {
      this.lose('its kernel did not come back with its sandbox');
    }
  }

  /** Called once when the bridge is lost, whatever the cause. */
  onLost(listener: (reason: BridgeLost) => void): void {
    if (this.lost) listener(this.lost);
    else this.lostListeners.push(listener);
  }

  get alive(): boolean {
    return this.lost === null;
  }

  /** Why the bridge is gone; empty while it serves. */
  lostReason(): string {
    return this.lost?.message ?? '';
  }

  /**
   * Runs a cell; each output line goes to `onOutput` as it comes; resolves at its end. The cell
   * is interrupted when `signal` aborts (the kernel keeps its state; one that ignores the
   * interrupt is replaced, and its cell ends with a ContextRestarted error).
   */
  async execute(code: string, envVars: Record<string, string>, onOutput: (line: OutputLine) => void, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    const interrupt = (): void => void this.interrupt().catch(() => undefined);
    signal.addEventListener('abort', interrupt, { once: true });
    try {
      await this.send({ op: 'execute', code, env_vars: envVars }, onOutput);
    } finally {
      signal.removeEventListener('abort', interrupt);
    }
  }

  interrupt(): Promise<void> {
    return this.send({ op: 'interrupt' });
  }

  restart(): Promise<void> {
    return this.send({ op: 'restart' });
  }

  /** Ends the bridge and its kernel (its stdin closes; the agent kills what is left). */
  async stop(): Promise<void> {
    this.lose('the context was removed');
    if (this.pid === 0) return;
    await this.agent.request({ op: 'signal', pid: this.pid, signal: 9 }).catch(() => undefined);
  }

  private async send(request: BridgeRequest, onOutput?: (line: OutputLine) => void): Promise<void> {
    if (this.lost) throw this.lost;
    const id = this.nextId++;
    const done = new Promise<void>((resolve, reject) => this.waiters.set(id, { resolve, reject, ...(onOutput && { onOutput }) }));
    try {
      await this.agent.request({ op: 'input', pid: this.pid, data: encodeFrame({ ...request, id }) });
    } catch (error) {
      this.waiters.delete(id);
      throw error;
    }
    return done;
  }

  private received(event: AgentOutputEvent): void {
    const bytes = event.data;
    if (event.stream !== 'stdout') {
      this.stderr.write(bytes);
      return;
    }
    if (this.lost) return;
    try {
      this.decoder.push(bytes, (message) => this.dispatch(message));
    } catch (error) {
      this.lose(`the kernel bridge broke its protocol: ${(error as Error).message}`);
      void this.stop();
    }
  }

  private dispatch(message: unknown): void {
    if (this.readyWaiter) return this.readied(message);
    const checked = validated(BridgeMessageSchema, message, 'a message');
    const waiter = this.waiters.get(checked.id);
    if (!waiter) throw new Error(`an answer nobody asked for (id ${checked.id})`);
    if ('output' in checked) {
      if (!waiter.onOutput) throw new Error(`output for request ${checked.id}, which runs no cell`);
      waiter.onOutput(checked.output);
      return;
    }
    this.waiters.delete(checked.id);
    if ('error' in checked) waiter.reject(new Error(checked.error));
    else waiter.resolve();
  }

  private readied(message: unknown): void {
    const ready = validated(BridgeReadySchema, message, 'its ready message');
    const waiter = this.readyWaiter!;
    this.readyWaiter = null;
    if (ready.ready) waiter.resolve();
    else {
      this.lose(`the kernel did not start: ${ready.error}`);
      waiter.reject(this.lost!);
    }
  }

  private ended(event: AgentEndEvent): void {
    const how = event.signal === null ? `exit status ${event.exit_code}` : `signal ${event.signal}`;
    const said = this.stderr.text().trim();
    this.lose(`the kernel bridge ended (${how})${said ? `: ${said}` : ''}`);
  }

  /** The bridge is gone, or its sandbox is: every waiting request fails with `reason`. */
  private lose(reason: string, sandboxEnded = false): void {
    if (this.lost || this.suspended) return;
    this.lost = new BridgeLost(reason, sandboxEnded);
    this.readyWaiter?.reject(this.lost);
    this.readyWaiter = null;
    for (const waiter of this.waiters.values()) waiter.reject(this.lost);
    this.waiters.clear();
    for (const listener of this.lostListeners.splice(0)) listener(this.lost);
  }
}

function validated<S extends TSchema>(schema: S, message: unknown, what: string): Static<S> {
  const result = validate(schema, message);
  if (!result.ok) throw new Error(`${what} out of protocol: ${result.message}`);
  return result.value;
}
