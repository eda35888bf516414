/**
 * The one framing used everywhere (guest runner, code tasks, microVM): a 4-byte big-endian
 * unsigned length, then that many bytes of UTF-8 JSON. Where a protocol says so (a sandbox's
 * agent, contract/sandbox-agent.ts), the JSON may be followed by a NUL byte and raw bytes, which
 * JSON text never holds: a message's bytes without base64 or a JSON string of them.
 */
export const FRAME_HEADER_BYTES = 4;
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;
const MAX_UINT32 = 0xffff_ffff;

export type FrameErrorCode = 'frame.too_large' | 'frame.empty' | 'frame.invalid_utf8' | 'frame.invalid_json' | 'frame.truncated';

export class FrameError extends Error {
  constructor(
    readonly code: FrameErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'FrameError';
  }
}

/** Between a frame's JSON and the raw bytes after it. */
const BYTES_SEPARATOR = 0;

/** A frame of `value`'s JSON, and `bytes` after it past a NUL when given. */
export function encodeFrame(value: unknown, maxFrameBytes = DEFAULT_MAX_FRAME_BYTES, bytes?: Uint8Array): Buffer {
  if (bytes) return Buffer.concat(encodeFrameParts(value, maxFrameBytes, bytes));
  const json = Buffer.from(JSON.stringify(value), 'utf8');
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + json.length);
  frame.writeUInt32BE(checkedLength(json.length, maxFrameBytes), 0);
  json.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

/**
 * A frame of `value`'s JSON with `bytes` after it, as two parts written in turn: its head (the
 * length, the JSON, the NUL) and the bytes themselves, not copied (a MiB of a file's bytes is
 * otherwise copied once more on its way to the agent).
 */
export function encodeFrameParts(value: unknown, maxFrameBytes: number, bytes: Uint8Array): [Buffer, Uint8Array] {
  const json = Buffer.from(JSON.stringify(value), 'utf8');
  const head = Buffer.allocUnsafe(FRAME_HEADER_BYTES + json.length + 1);
  head.writeUInt32BE(checkedLength(json.length + 1 + bytes.length, maxFrameBytes), 0);
  json.copy(head, FRAME_HEADER_BYTES);
  head[FRAME_HEADER_BYTES + json.length] = BYTES_SEPARATOR;
  return [head, bytes];
}

function checkedLength(length: number, maxFrameBytes: number): number {
  const limit = Math.min(maxFrameBytes, MAX_UINT32);
  if (length > limit) throw new FrameError('frame.too_large', `frame of ${length} bytes exceeds the maximum of ${limit} bytes`);
  return length;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Parses one complete frame payload. */
export function decodePayload(payload: Uint8Array): unknown {
  if (payload.length === 0) throw new FrameError('frame.empty', 'zero-length frame: expected a JSON document');
  let text: string;
  try {
    text = strictUtf8.decode(payload);
  } catch {
    throw new FrameError('frame.invalid_utf8', 'frame payload is not valid UTF-8');
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new FrameError('frame.invalid_json', `frame payload is not valid JSON: ${(error as Error).message}`);
  }
}

/**
 * Streaming decoder: feed it chunks as they arrive (split or pipelined frames alike).
 * The declared length is checked against the maximum before any payload buffer exists,
 * so a hostile header cannot make us allocate.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private expected: number | null = null;

  /** `withBytes`: a NUL in a frame ends its JSON, and what follows is the message's bytes (else it is bad JSON). */
  constructor(
    private readonly maxFrameBytes = DEFAULT_MAX_FRAME_BYTES,
    private readonly withBytes = false,
  ) {}

  /**
   * Feeds bytes; each complete message goes to `onMessage` in order, with the bytes after its
   * JSON if it has any. A bad frame throws FrameError after the good frames before it were delivered.
   */
  push(chunk: Buffer, onMessage: (message: unknown, bytes?: Buffer) => void): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    for (;;) {
      if (this.expected === null) {
        if (this.buffered < FRAME_HEADER_BYTES) return;
        const length = this.take(FRAME_HEADER_BYTES).readUInt32BE(0);
        if (length > this.maxFrameBytes) {
          throw new FrameError('frame.too_large', `frame of ${length} bytes exceeds the maximum of ${this.maxFrameBytes} bytes`);
        }
        this.expected = length;
      }
      if (this.buffered < this.expected) return;
      const payload = this.take(this.expected);
      this.expected = null;
      const separator = this.withBytes ? payload.indexOf(BYTES_SEPARATOR) : -1;
      if (separator < 0) onMessage(decodePayload(payload));
      else onMessage(decodePayload(payload.subarray(0, separator)), payload.subarray(separator + 1));
    }
  }

  /** Call at end of stream: a partial frame left over is a truncation. */
  end(): void {
    if (this.expected !== null || this.buffered > 0) {
      const declared = this.expected === null ? 'a partial header' : `${this.buffered} of ${this.expected} payload bytes`;
      throw new FrameError('frame.truncated', `stream ended inside a frame (${declared})`);
    }
  }

  /** True from a frame's first byte until its last. */
  get midFrame(): boolean {
    return this.expected !== null || this.buffered > 0;
  }

  private take(count: number): Buffer {
    const first = this.chunks[0];
    let out: Buffer;
    if (first && first.length >= count) {
      out = first.subarray(0, count);
      if (first.length === count) this.chunks.shift();
      else this.chunks[0] = first.subarray(count);
    } else {
      out = Buffer.allocUnsafe(count);
      let filled = 0;
      while (filled < count) {
        const head = this.chunks[0]!;
        const used = Math.min(head.length, count - filled);
        head.copy(out, filled, 0, used);
        filled += used;
        if (used === head.length) this.chunks.shift();
        else this.chunks[0] = head.subarray(used);
      }
    }
    this.buffered -= count;
    return out;
  }
}
