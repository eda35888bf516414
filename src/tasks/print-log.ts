import type { PrintArgs } from '../contract/task.js';

export interface PrintCaps {
  maxCalls: number;
  maxBytes: number;
  /** How the note names the call: `print()` or `console.log()`. */
  call: string;
}

/**
 * The host's own record of a task's print calls, built from the calls the harness streams as
 * they happen: the first `maxCalls`, up to `maxBytes` of JSON, then a note counting the rest.
 * The same rule, and the same note, as the harnesses' `Prints`: a harness that keeps to it sends
 * a final message whose print_args equal this list, and anything else on the pipe cannot make it
 * grow past the caps.
 */
export class PrintLog {
  private readonly kept: PrintArgs = [];
  private keptBytes = 0;
  private dropped = 0;

  constructor(private readonly caps: PrintCaps) {}

  record(args: string[]): void {
    const size = Buffer.byteLength(JSON.stringify(args));
    if (this.dropped > 0 || this.kept.length >= this.caps.maxCalls || this.keptBytes + size > this.caps.maxBytes) {
      this.drop(1);
    } else {
      this.kept.push(args);
      this.keptBytes += size;
    }
  }

  /** Calls the harness dropped without sending them (it counts them in batches). */
  drop(count: number): void {
    this.dropped = Math.min(this.dropped + count, Number.MAX_SAFE_INTEGER);
  }

  list(): PrintArgs {
    if (this.dropped === 0) return [...this.kept];
    const calls = this.dropped === 1 ? 'call' : 'calls';
    const note = `[${this.dropped} more ${this.caps.call} ${calls} dropped: print_args keeps the first ${this.caps.maxCalls} calls, up to ${this.caps.maxBytes} bytes]`;
    return [...this.kept, [note]];
  }
}
