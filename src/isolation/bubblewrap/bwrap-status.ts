import type { Readable } from 'node:stream';

/** bwrap writes two short lines; more is not bwrap's. */
const STATUS_LIMIT = 64 * 1024;
/** What bwrap's die() exits with: a sandbox it could not set up. */
const BWRAP_FAILED = 1;

/**
 * What bwrap says on --json-status-fd: the sandbox's pid once it made it, then, when the
 * program exits, its exit code, which bwrap writes only for a program it ran. A sandbox that
 * died in bwrap's own setup (a namespace it could not make, a loopback it could not set up, an
 * exec that failed) exits 1 with no exit code said, which is how it is told from a program that
 * exited 1.
 */
export class BwrapStatus {
  /** The sandbox's first process, in the host's PID namespace; null until bwrap said it. */
  childPid: number | null = null;
  /** Resolves once bwrap has closed the fd: true if it ran the program. */
  readonly ran: Promise<boolean>;
  private text = '';

  constructor(source: Readable) {
    this.ran = this.read(source);
  }

  /** Whether an exit (bwrap's own code) is bwrap's setup failing rather than the program's end. */
  async setupFailed(exitCode: number | null): Promise<boolean> {
    return exitCode === BWRAP_FAILED && !(await this.ran);
  }

  private async read(source: Readable): Promise<boolean> {
    try {
      for await (const chunk of source) {
        if (this.text.length < STATUS_LIMIT) this.text += (chunk as Buffer).toString('utf8');
        const pid = /"child-pid":\s*(\d+)/.exec(this.text);
        if (pid && this.childPid === null) this.childPid = Number(pid[1]);
      }
    } catch {
      // Closed with bwrap: whatever it wrote has been read.
    }
    return /"exit-code":\s*\d+/.test(this.text);
  }
}
