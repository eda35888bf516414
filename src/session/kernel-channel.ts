import { PassThrough, type Readable } from 'node:stream';
import type { TSchema, Static } from '@sinclair/typebox';
import { KernelReadySchema, type KernelRequest } from '../contract/session-kernel.js';
import { validate } from '../contract/validate.js';
import { CappedCapture } from '../sandbox/output-capture.js';
import type { OutputSink } from '../sandbox/types.js';
import { encodeFrame, FrameDecoder } from '../wire/frame-codec.js';

/** Room in a reply for everything but its file or its texts. */
const FRAME_ROOM_BYTES = 1024 * 1024;
/** A run reply's texts: stdout, stderr, value and error. */
const REPLY_TEXTS = 4;
/** The most JSON spends on one byte of UTF-8: a control character is `\u00XX`. */
const JSON_BYTES_PER_BYTE = 6;
/** What the kernel says on its own stderr before it moves fd 2 (a crash at start-up) is kept for the error. */
const KERNEL_STDERR_BYTES = 16 * 1024;

/** The kernel broke the protocol, died, or did not answer in time: the session cannot go on. */
export class KernelLost extends Error {
  constructor(
    message: string,
    /** Lost because a request got no answer by its deadline (a cell that would not stop). */
    readonly deadline: boolean,
  ) {
    super(message);
  }
}

/**
 * The host's end of a session kernel's pipes: requests framed onto its stdin (a stream the
 * sandbox feeds as it comes), replies decoded from its stdout and matched by id. One request
 * at a time is the caller's rule (LiveSession serialises them); a reply that fails its schema,
 * or bytes that are not frames, lose the kernel.
 */
export class KernelChannel {
  readonly stdin: Readable;
  readonly stdout: OutputSink = { write: (chunk) => this.receive(chunk) };
  readonly stderr = new CappedCapture(KERNEL_STDERR_BYTES);
  private readonly input = new PassThrough();
  private readonly decoder: FrameDecoder;
  /** Id 0 is the ready message, the kernel's first. */
  private readonly pending = new Map<number, { deliver(message: unknown): void; fail(error: KernelLost): void }>();
  private nextId = 1;
  private lost: KernelLost | null = null;
  private readonly ready: Promise<Static<typeof KernelReadySchema>>;

  /**
   * The frame maximum holds any reply a kernel makes (a file of the session limit in base64, or
   * a run reply whose texts the kernel cut to `outputBytes` each, however JSON escapes them), so
   * a frame over it is a cell's own writing to the protocol: it ends the session, unread.
   */
  constructor(maxFileBytes: number, outputBytes: number) {
    this.stdin = this.input;
    const fileReply = Math.ceil((maxFileBytes * 4) / 3);
    const runReply = REPLY_TEXTS * JSON_BYTES_PER_BYTE * outputBytes;
    this.decoder = new FrameDecoder(Math.max(fileReply, runReply) + FRAME_ROOM_BYTES);
    this.ready = new Promise((resolve, reject) => this.expect(0, KernelReadySchema, resolve, reject));
    // Rejections are read by whoever awaits `started`; an unawaited one must not crash the host.
    this.ready.catch(() => undefined);
  }

  /** The kernel's ready message: its interpreter is up and reading requests. */
  started(): Promise<Static<typeof KernelReadySchema>> {
    return this.ready;
  }

  /** Sends one request and waits for its reply, checked against `schema`; rejects with KernelLost. */
  request<S extends TSchema>(message: KernelRequest, schema: S, deadlineMs: number): Promise<Static<S>> {
    if (this.lost) return Promise.reject(this.lost);
    const id = this.nextId++;
    return new Promise<Static<S>>((resolve, reject) => {
      const timer = setTimeout(() => this.lose(`no answer within ${Math.round(deadlineMs / 1000)} s`, true), deadlineMs);
      this.expect(
        id,
        schema,
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error) => {
          clearTimeout(timer);
          reject(error);
        },
      );
      this.input.write(encodeFrame({ ...message, id }));
    });
  }

  /** The kernel is gone (or must be): every pending and later request fails with `reason`. */
  lose(reason: string, deadline = false): void {
    if (this.lost) return;
    this.lost = new KernelLost(reason, deadline);
    for (const waiter of this.pending.values()) waiter.fail(this.lost);
    this.pending.clear();
    this.input.end();
  }

  private expect<S extends TSchema>(id: number, schema: S, resolve: (value: Static<S>) => void, reject: (error: KernelLost) => void): void {
    this.pending.set(id, {
      deliver: (message) => {
        const checked = validate(schema, message);
        if (checked.ok) return resolve(checked.value);
        // This waiter has left `pending` already: lose() fails the others, this one is failed here.
        this.lose(`the kernel answered out of protocol: ${checked.message}`);
        reject(this.lost!);
      },
      fail: reject,
    });
  }

  /** Ends the kernel's stdin: it exits when it reads end of file. */
  close(): void {
    this.input.end();
  }

  private receive(chunk: Buffer): void {
    if (this.lost) return;
    try {
      this.decoder.push(chunk, (message) => {
        const fields = message !== null && typeof message === 'object' ? (message as { id?: unknown; ready?: unknown }) : {};
        const id = fields.ready === true ? 0 : fields.id;
        const waiter = typeof id === 'number' ? this.pending.get(id) : undefined;
        if (!waiter) throw new Error(`a message nobody asked for (id ${String(id)})`);
        this.pending.delete(id as number);
        waiter.deliver(message);
      });
    } catch (error) {
      this.lose(`the kernel's output is not the protocol: ${(error as Error).message}`);
    }
  }
}
