import { Type } from '@sinclair/typebox';
import { validate } from '../contract/validate.js';
import type { OutputSink } from '../isolation/types.js';
import { FrameDecoder, FrameError } from '../wire/frame-codec.js';
import { PipeErrorMessageSchema, PipeResultMessageSchema, type PipeMessage, type PrintArgs } from '../contract/task.js';
import { PrintLog, type PrintCaps } from './print-log.js';

/**
 * `cutOff`: the stream ended inside a frame, which a kill explains; every other protocol error
 * is bytes the harness never writes.
 */
export type ChannelReading = { message: PipeMessage } | { protocolError: string; cutOff?: true } | { silent: true };

/** One print() / console.log() call the harness kept, sent as it was made. */
const PipePrintMessageSchema = Type.Object({ print: Type.Array(Type.String()) }, { additionalProperties: false });
/** Calls the harness dropped past the caps, counted in batches. */
const PipeDroppedMessageSchema = Type.Object({ dropped: Type.Integer({ minimum: 1 }) }, { additionalProperties: false });

const AFTER_MESSAGE = 'the task wrote to its result pipe after its message';

/** The configuration's defaults; a task passes its own. */
const DEFAULT_PRINT_CAPS: PrintCaps = { maxCalls: 100, maxBytes: 1024 * 1024, call: 'print()' };

/**
 * The parent's end of a task's result pipe. The task's code can write to the pipe as well as the
 * harness can, so every byte on it is untrusted: frames are decoded as they arrive (never
 * buffered past the limit); any number of print frames (`{print}`, `{dropped}`), which go into
 * the host's own capped PrintLog, then exactly one message (`{result, print_args}` or
 * `{error, print_args}`), and nothing after it. Once the stream has ended: the message, or why
 * there is none. Checking the message against the prints and the request is run-task's part.
 */
export class ResultChannel implements OutputSink {
  private readonly decoder: FrameDecoder;
  private readonly prints: PrintLog;
  private message: PipeMessage | null = null;
  private failure: string | null = null;
  private cutOff = false;
  private ended = false;

  constructor(maxMessageBytes: number, printCaps: PrintCaps = DEFAULT_PRINT_CAPS) {
    this.decoder = new FrameDecoder(maxMessageBytes);
    this.prints = new PrintLog(printCaps);
  }

  write(chunk: Buffer): void {
    if (this.failure !== null) return;
    try {
      this.decoder.push(chunk, (message) => this.accept(message));
    } catch (error) {
      this.fail(this.message === null ? (error as FrameError).message : AFTER_MESSAGE);
    }
  }

  /** Call after the sandbox has exited: every byte has arrived by then. */
  read(): ChannelReading {
    if (!this.ended && this.failure === null) {
      try {
        this.decoder.end();
      } catch (error) {
        if (this.message !== null) this.fail(AFTER_MESSAGE);
        else {
          this.fail((error as FrameError).message);
          this.cutOff = true;
        }
      }
    }
    this.ended = true;
    if (this.failure !== null) return this.cutOff ? { protocolError: this.failure, cutOff: true } : { protocolError: this.failure };
    return this.message === null ? { silent: true } : { message: this.message };
  }

  /** The host's record of the task's prints, capped whatever arrived. */
  printArgs(): PrintArgs {
    return this.prints.list();
  }

  private accept(frame: unknown): void {
    if (this.failure !== null) return;
    const kind = kindOf(frame);
    if (this.message !== null) return this.fail(kind === 'message' ? 'the task sent more than one message' : AFTER_MESSAGE);
    if (kind === 'print') {
      const print = validate(PipePrintMessageSchema, frame);
      if (print.ok) this.prints.record(print.value.print);
      else this.fail(`the task's print message is malformed: ${print.message}`);
    } else if (kind === 'dropped') {
      const dropped = validate(PipeDroppedMessageSchema, frame);
      if (dropped.ok) this.prints.drop(dropped.value.dropped);
      else this.fail(`the task's print message is malformed: ${dropped.message}`);
    } else {
      const isResult = frame !== null && typeof frame === 'object' && 'result' in frame;
      const checked = validate(isResult ? PipeResultMessageSchema : PipeErrorMessageSchema, frame);
      if (checked.ok) this.message = checked.value;
      else this.fail(`the task's message is malformed: ${checked.message}`);
    }
  }

  private fail(reason: string): void {
    this.failure ??= reason;
  }
}

/** A frame with `result` or `error` is a message; one with neither is read as an error message. */
function kindOf(frame: unknown): 'print' | 'dropped' | 'message' {
  if (frame === null || typeof frame !== 'object' || Array.isArray(frame) || 'result' in frame || 'error' in frame) return 'message';
  if ('print' in frame) return 'print';
  return 'dropped' in frame ? 'dropped' : 'message';
}
