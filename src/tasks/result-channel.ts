import { validate } from '../contract/validate.js';
import type { OutputSink } from '../sandbox/types.js';
import { FrameDecoder, FrameError } from '../wire/frame-codec.js';
import { PipeErrorMessageSchema, PipeResultMessageSchema, type PipeMessage } from '../contract/task.js';

export type ChannelReading = { message: PipeMessage } | { protocolError: string } | { silent: true };

/**
 * The parent's end of a task's result pipe: frames decoded as they arrive (never buffered past
 * the limit), and once the stream has ended, the task's one message or why there is none.
 */
export class ResultChannel implements OutputSink {
  private readonly decoder: FrameDecoder;
  private readonly messages: unknown[] = [];
  private failure: string | null = null;

  constructor(maxMessageBytes: number) {
    this.decoder = new FrameDecoder(maxMessageBytes);
  }

  write(chunk: Buffer): void {
    if (this.failure !== null) return;
    try {
      this.decoder.push(chunk, (message) => this.messages.push(message));
    } catch (error) {
      this.failure = (error as FrameError).message;
    }
    if (this.messages.length > 1) this.failure = 'the task sent more than one message';
  }

  /** Call after the sandbox has exited: every byte has arrived by then. */
  read(): ChannelReading {
    if (this.failure === null) {
      try {
        this.decoder.end();
      } catch (error) {
        this.failure = (error as FrameError).message;
      }
    }
    if (this.failure !== null) return { protocolError: this.failure };
    const [message] = this.messages;
    if (message === undefined) return { silent: true };
    return checked(message);
  }
}

/** Exactly one of `result` / `error`, each in its documented shape. */
function checked(message: unknown): ChannelReading {
  const isResult = message !== null && typeof message === 'object' && 'result' in message;
  const validation = validate(isResult ? PipeResultMessageSchema : PipeErrorMessageSchema, message);
  return validation.ok ? { message: validation.value } : { protocolError: `the task's message is malformed: ${validation.message}` };
}
