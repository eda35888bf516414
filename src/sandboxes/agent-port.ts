import type { AgentEndEvent, AgentError, AgentFsEvent, AgentOutputEvent, AgentReplyOf, AgentRequestOf, AgentRequest } from '../contract/sandbox-agent.js';

/** An operation the agent refused or failed, with its code (contract/sandbox-agent.ts). */
export class AgentOperationError extends Error {
  constructor(readonly failure: AgentError) {
    super(failure.message);
    this.name = 'AgentOperationError';
  }

  get code(): AgentError['code'] {
    return this.failure.code;
  }
}

/** The sandbox (its agent) is gone: ended, killed, expired or broken. */
export class SandboxGoneError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxGoneError';
  }
}

/** The requests that start something the agent then serves as a process: a process, a connection to a port. */
export type StartingOp = 'start' | 'connect';

export interface ProcessListener {
  /**
   * A promise: the listener holds the output until it resolves (its client took it, or left).
   * The agent sends no more than a window of a process's output that is held, so a listener
   * that holds pauses the process (its pipes fill) instead of growing the host's memory.
   */
  output(event: AgentOutputEvent): void | Promise<void>;
  /** The last event of a process; the listener is dropped after it. */
  end(event: AgentEndEvent): void;
  /** The sandbox ended under the process: no end event will come. */
  lost?(error: SandboxGoneError): void;
  /** Whether a client still waits on what it hears (absent: as long as it listens); one kept only to see the end, for a deadline, does not. */
  following?(): boolean;
}

/**
 * What the faces of a long-lived sandbox (E2B's envd, /v1/sandboxes) use of its agent.
 * Every method rejects with AgentOperationError when the agent says no, and with
 * SandboxGoneError once the sandbox has ended.
 */
export interface SandboxAgentPort {
  request<Op extends Exclude<AgentRequest['op'], StartingOp>>(request: AgentRequestOf<Op>): Promise<AgentReplyOf<Op>>;
  /** Starts a process (or a connection, served as one) with `listener` attached before its first output can arrive. */
  start(request: AgentRequestOf<StartingOp>, listener: ProcessListener): Promise<{ pid: number; detach(): void }>;
  /** Follows a running process from now on; throws AgentOperationError `no_such_process` when it is not running. */
  follow(pid: number, listener: ProcessListener): { detach(): void };
  /** Changes under a watched directory (from `request({op:'watch'})`), from now on. */
  onWatch(watch: number, listener: (event: AgentFsEvent) => void): { detach(): void };
}
