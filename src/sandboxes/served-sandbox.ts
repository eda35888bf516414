import type { Readable } from 'node:stream';
import { CodedError, contractError } from '../contract/errors.js';
import type { CappedCapture } from '../isolation/output-capture.js';
import type { OutputSink, PreparedSandbox, SandboxOutcome } from '../isolation/types.js';
import { SandboxUnavailableError } from '../isolation/types.js';

/** The host's end of the pipes of a program that serves requests (a long-lived sandbox's agent). */
export interface ServingChannel {
  readonly stdin: Readable;
  readonly stdout: OutputSink;
  readonly stderr: CappedCapture;
  /** The program is gone, or must be: what waits on it fails with `reason`. */
  lose(reason: string): void;
}

/** How the one who serves is named in why the sandbox ended (`its agent`). */
export interface ServedBy {
  program: string;
  /** Why it ended, said of the whole: at the backend's deadline, aborted, killed for memory. */
  timedOut: string;
  aborted: string;
  outOfMemory: string;
}

/**
 * The lifecycle of a long-lived sandbox (sessions are ones too): one prepared sandbox whose one long job
 * is a program serving a channel, until the sandbox ends for the first reason that comes (the
 * caller ends it, the program exits or breaks its protocol, the sandbox fails). The first reason
 * is kept; the channel is lost with it, so whatever waits on the program fails at once, and the
 * work dir is released once the sandbox's processes are gone.
 */
export class ServedSandbox {
  private readonly stop = new AbortController();
  private endedReason: string | null = null;
  /** What its backend could not do once it ended (keep its disk, PreparedSandbox.keepDisk). */
  releaseFailure: Error | null = null;
  /** Whether it ended because it failed (its program or its runtime died or went silent), not by a caller, its lifetime or a pause. */
  private endedFailing = false;
  /** While a checkpoint saves it: its program's exit is the checkpoint's doing, kept here, not the reason. */
  private suspending: { exit: string | null } | null = null;
  private readonly ended: Promise<void>;
  private markEnded!: () => void;

  constructor(
    private readonly channel: ServingChannel,
    private readonly by: ServedBy,
    /** Called once, with the reason, when the sandbox is over (its processes may still be dying). */
    private readonly onSettled: (reason: string) => void,
  ) {
    this.ended = new Promise((resolve) => (this.markEnded = resolve));
  }

  get running(): boolean {
    return this.endedReason === null;
  }

  /** Why it ended; null while it runs. */
  get reason(): string | null {
    return this.endedReason;
  }

  /** It ended because it failed: its program exited or broke off, or its runtime died, under it (state `error`). */
  get failed(): boolean {
    return this.endedFailing;
  }

  /** Starts the long job on `prepared`, fed by the channel; the sandbox ends when the job does, at `lifetimeMs` at the latest. */
  serve(prepared: PreparedSandbox, lifetimeMs: number): void {
    const outcome = prepared.start({ timeoutMs: lifetimeMs, stdin: this.channel.stdin, stdout: this.channel.stdout, stderr: this.channel.stderr, signal: this.stop.signal });
    void outcome
      .then(
        (ended) => ({ reason: this.describeExit(ended), failed: !ended.timedOut && !ended.aborted }),
        (error: Error) => ({ reason: `the sandbox failed: ${error.message}`, failed: true }),
      )
      .then(async ({ reason, failed }) => {
        this.finished(reason, failed);
        // It has ended once its work dir is deleted and its blocks are the host's again (or its disk kept).
        await prepared.release().catch((error: Error) => (this.releaseFailure = error));
        this.markEnded();
      });
  }

  /**
   * Waits for the program to say it serves (`ready`), at most `deadlineSeconds`; otherwise ends
   * the sandbox and throws backend.setup_failed, naming `what` could not start.
   */
  async untilReady<T>(ready: Promise<T>, deadlineSeconds: number, what: string): Promise<T> {
    const deadline = setTimeout(() => this.channel.lose(`${this.by.program} was not up within ${deadlineSeconds} s`), deadlineSeconds * 1000);
    try {
      return await ready;
    } catch (error) {
      await this.end((error as Error).message);
      throw new CodedError(contractError('backend.setup_failed', `${what} could not start: ${this.endedReason}`), { http_status: 500 });
    } finally {
      clearTimeout(deadline);
    }
  }

  /** Ends the sandbox (idempotent): the program's stdin closes and its whole tree is killed. */
  async end(reason: string): Promise<void> {
    this.settle(reason, false);
    this.stop.abort();
    await this.ended;
  }

  /**
   * Ends the sandbox as failed (state `error`), with `reason`: its program stopped answering or
   * broke its protocol. Its whole tree is killed and its work dir released, as by end().
   */
  async fail(reason: string): Promise<void> {
    this.settle(reason, true);
    this.stop.abort();
    await this.ended;
  }

  /**
   * Ends the sandbox by `save` (a checkpoint: its processes are kept, then stop), with `reason`.
   * If `save` fails, the sandbox runs on as it was; unless it ended meanwhile, which then says so.
   */
  async suspend(reason: string, save: () => Promise<void>): Promise<void> {
    const suspending: { exit: string | null } = { exit: null };
    this.suspending = suspending;
    try {
      await save();
      this.settle(reason, false);
    } catch (error) {
      if (suspending.exit !== null) this.settle(`${suspending.exit}, while it was being paused: ${(error as Error).message}`, true);
      throw error;
    } finally {
      this.suspending = null;
    }
    await this.ended;
  }

  private finished(reason: string, failed: boolean): void {
    if (this.suspending) this.suspending.exit = reason;
    else this.settle(reason, failed);
  }

  private settle(reason: string, failed: boolean): void {
    if (this.endedReason !== null) return;
    this.endedReason = reason;
    this.endedFailing = failed;
    this.onSettled(reason);
  }

  private describeExit(outcome: SandboxOutcome): string {
    if (outcome.timedOut) return this.by.timedOut;
    if (outcome.aborted) return this.by.aborted;
    if (outcome.oomKilled) return this.by.outOfMemory;
    const how = outcome.exitCode === null ? `killed by ${outcome.signal}` : `exit ${outcome.exitCode}`;
    const said = this.channel.stderr.text().trim();
    return `${this.by.program} exited (${how})${said ? `: ${said.slice(-2000)}` : ''}`;
  }
}

/** A sandbox (or toolchain) this host cannot give: 503 backend.unavailable at a session's or sandbox's creation. */
export function refusedHere(error: unknown): unknown {
  return error instanceof SandboxUnavailableError ? new CodedError(contractError('backend.unavailable', `sandbox unavailable: ${error.message}`), { http_status: 503 }) : error;
}
