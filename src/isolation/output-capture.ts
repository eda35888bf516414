import { createHash, type Hash } from 'node:crypto';
import type { OutputSink } from './types.js';

/**
 * Keeps the first `maxBytes` of a stream and drops the rest as it arrives (never buffered),
 * while counting and hashing every byte, dropped ones included.
 */
export class CappedCapture implements OutputSink {
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;
  private observed = 0;
  private readonly hash: Hash | null;

  constructor(
    private readonly maxBytes: number,
    options: { sha256?: boolean } = {},
  ) {
    this.hash = options.sha256 ? createHash('sha256') : null;
  }

  write(chunk: Buffer): void {
    this.observed += chunk.length;
    this.hash?.update(chunk);
    const room = this.maxBytes - this.keptBytes;
    if (room <= 0) return;
    const slice = chunk.length <= room ? chunk : chunk.subarray(0, room);
    // Copy: the producer may reuse its buffer after we return.
    this.kept.push(Buffer.from(slice));
    this.keptBytes += slice.length;
  }

  /** Adds bytes the runner itself reports (e.g. a timeout note), past the cap if need be. */
  appendNote(text: string): void {
    const note = Buffer.from(text, 'utf8');
    this.kept.push(note);
    this.keptBytes += note.length;
  }

  get observedBytes(): number {
    return this.observed;
  }

  get truncated(): boolean {
    return this.observed > this.maxBytes;
  }

  bytes(): Buffer {
    return Buffer.concat(this.kept, this.keptBytes);
  }

  /** Lossy UTF-8: invalid sequences become U+FFFD, so the result is always valid JSON text. */
  text(): string {
    return this.bytes().toString('utf8');
  }

  sha256(): string {
    if (!this.hash) throw new Error('CappedCapture was created without sha256');
    return this.hash.digest('hex');
  }
}
