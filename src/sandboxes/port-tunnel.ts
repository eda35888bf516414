import { Duplex } from 'node:stream';
import type { AgentOutputEvent } from '../contract/sandbox-agent.js';
import { AgentOperationError, type SandboxAgentPort } from './agent-port.js';
import { PortClosedError } from '../isolation/types.js';

/** The most of a write sent in one input request. */
const INPUT_PIECE_BYTES = 256 * 1024;

/**
 * One TCP connection to a port on the sandbox's loopback, as a stream: the agent makes it (it is
 * in the sandbox's network namespace) and serves it as a process (agent `connect`): what is
 * written here is its input, what the server answers its output. What the reader holds holds the
 * connection (the agent's output window), so a slow client slows the server in the sandbox
 * instead of filling the host's memory; what the server does not read holds the writer (the
 * agent's input window) likewise. It errors with PortClosedError when nobody listens.
 */
export class PortTunnel extends Duplex {
  private pid: number | null = null;
  private started: Promise<number> | null = null;
  /**
   * Releases the output the reader could not take yet, once it reads again: each event pushed
   * past the reader's buffer, as the agent may send several while one waits (one kept alone left
   * the others held for ever, the agent uncredited, and the download stalled).
   */
  private readonly waitingForReader: Array<() => void> = [];

  /** `windowBytes`: what the server may send before the reader took it (the agent's output window of the connection). */
  constructor(
    private readonly agent: SandboxAgentPort,
    private readonly port: number,
    private readonly windowBytes?: number,
  ) {
    super({ allowHalfOpen: true });
  }

  /** Makes the connection; resolves with its id once it is made, rejects with PortClosedError when nobody listens. */
  open(): Promise<number> {
    this.started ??= this.agent
      .start(
        { op: 'connect', port: this.port, ...(this.windowBytes !== undefined && { output_window: this.windowBytes }) },
        {
          output: (event) => this.fromServer(event),
          end: () => this.push(null),
          lost: (error) => this.destroy(error),
        },
      )
      .then(
        ({ pid }) => (this.pid = pid),
        (error: Error) => {
          throw error instanceof AgentOperationError && error.code === 'refused' ? new PortClosedError(this.port, error.message) : error;
        },
      );
    return this.started;
  }

  private fromServer(event: AgentOutputEvent): void | Promise<void> {
    if (this.push(event.data)) return;
    return new Promise<void>((resolve) => this.waitingForReader.push(resolve));
  }

  override _read(): void {
    for (const release of this.waitingForReader.splice(0)) release();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.open()
      .then(async (pid) => {
        // In pieces of at most INPUT_PIECE_BYTES: one input request's frame stays small on every channel (a microVM's guest's too).
        for (let at = 0; at < chunk.length; at += INPUT_PIECE_BYTES) {
          await this.agent.request({ op: 'input', pid, data: chunk.subarray(at, at + INPUT_PIECE_BYTES) });
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
    // The client went away: so does the connection (any signal drops it), made or still being made.
    const drop = (pid: number) => void this.agent.request({ op: 'signal', pid, signal: 9 }).catch(() => undefined);
    if (this.pid !== null) drop(this.pid);
    else this.started?.then(drop, () => undefined);
    for (const release of this.waitingForReader.splice(0)) release();
    callback(error);
  }
}
