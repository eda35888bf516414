import { Duplex } from 'node:stream';
import type { AgentOutputEvent, AgentUser } from '../contract/sandbox-agent.js';
import type { SandboxAgentPort } from './agent-port.js';

/** The agent's binary, at the same path in every sandbox (live-sandbox.ts): as `relay PORT` it is one TCP connection (agent/relay.go). */
export const SANDBOX_AGENT_PATH = '/.agent-runner/sandbox-agent';

/** The tag of a relay's process: not one of the sandbox's own, so lists of its processes leave it out. */
export const RELAY_TAG = 'agent-runner:port';

/** The most of a write sent in one input request. */
const INPUT_PIECE_BYTES = 256 * 1024;

/** A relay's exit status when nobody listens on the port (agent/relay.go relayRefused). */
const REFUSED = 111;

/** Nobody listens on the port: E2B's proxy answers such a request 502. */
export class PortClosedError extends Error {
  constructor(
    readonly port: number,
    said: string,
  ) {
    super(`nothing listens on port ${port} of the sandbox${said ? ` (${said})` : ''}`);
    this.name = 'PortClosedError';
  }
}

/**
 * One TCP connection to a port on the sandbox's loopback, as a stream: the agent's relay process
 * (`sandbox-agent relay PORT`), its stdin what is written here, its stdout what is read. What the
 * reader holds holds the relay (the agent's output window), so a slow client slows the server in
 * the sandbox instead of filling the host's memory. It errors with PortClosedError when nobody
 * listens, before any byte comes.
 */
export class PortTunnel extends Duplex {
  private pid: number | null = null;
  private started: Promise<number> | null = null;
  private stderr = '';
  private received = false;
  /** Resolves the output the reader could not take yet, once it reads again. */
  private resumeReading: (() => void) | null = null;

  /**
   * `user`: whom the relay runs as. Root where the sandbox has one: the agent's directory is
   * root's (bwrap makes a bound file's parents 0700), and a port is no user's to keep from root.
   */
  constructor(
    private readonly agent: SandboxAgentPort,
    private readonly port: number,
    private readonly user: AgentUser,
  ) {
    super({ allowHalfOpen: true });
  }

  /** Starts the relay; resolves once it runs (its connection may still be refused: then the stream errors). */
  open(): Promise<number> {
    this.started ??= this.agent
      .start(
        { op: 'start', cmd: SANDBOX_AGENT_PATH, args: ['relay', String(this.port)], envs: {}, stdin: true, tag: RELAY_TAG, user: this.user },
        {
          output: (event) => this.fromRelay(event),
          end: (event) => {
            if (event.exit_code === REFUSED && !this.received) this.destroy(new PortClosedError(this.port, this.stderr.trim()));
            else this.push(null);
          },
          lost: (error) => this.destroy(error),
        },
      )
      .then(({ pid }) => (this.pid = pid));
    return this.started;
  }

  private fromRelay(event: AgentOutputEvent): void | Promise<void> {
    const data = Buffer.from(event.data, 'base64');
    if (event.stream !== 'stdout') {
      this.stderr = (this.stderr + data.toString('utf8')).slice(-1024);
      return;
    }
    this.received = true;
    if (this.push(data)) return;
    return new Promise<void>((resolve) => (this.resumeReading = resolve));
  }

  override _read(): void {
    const resume = this.resumeReading;
    this.resumeReading = null;
    resume?.();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.open()
      .then(async (pid) => {
        // In pieces of at most INPUT_PIECE_BYTES: one input request's frame stays small on every channel (a microVM's guest's too).
        for (let at = 0; at < chunk.length; at += INPUT_PIECE_BYTES) {
          await this.agent.request({ op: 'input', pid, data: chunk.subarray(at, at + INPUT_PIECE_BYTES).toString('base64') });
        }
      })
      .then(
        () => callback(),
        (error: Error) => callback(error),
      );
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.open()
      .then((pid) => this.agent.request({ op: 'close_stdin', pid }))
      .then(
        () => callback(),
        (error: Error) => callback(error),
      );
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // The connection is dropped: its relay with it (SIGKILL; one that ended already is no one).
    if (this.pid !== null) void this.agent.request({ op: 'signal', pid: this.pid, signal: 9 }).catch(() => undefined);
    this.resumeReading?.();
    callback(error);
  }
}
