import { StringDecoder } from 'node:string_decoder';
import type { OutputStream } from '../contract/job-events.js';
import type { OutputSink } from '../isolation/types.js';

export type OutputListener = (stream: OutputStream, text: string) => void;

/**
 * Hands a stream's output on as text while the job runs, within the bytes the result keeps:
 * a follower sees what the result will hold, never more. Chunks are cut on character
 * boundaries (a character split between two reads waits for its end).
 */
export class LiveOutput implements OutputSink {
  private readonly decoder = new StringDecoder('utf8');
  private room: number;

  constructor(
    private readonly stream: OutputStream,
    maxBytes: number,
    private readonly listener: OutputListener,
  ) {
    this.room = maxBytes;
  }

  write(chunk: Buffer): void {
    if (this.room <= 0) return;
    const kept = chunk.length <= this.room ? chunk : chunk.subarray(0, this.room);
    this.room -= kept.length;
    const text = this.decoder.write(kept) + (this.room === 0 ? this.decoder.end() : '');
    if (text) this.listener(this.stream, text);
  }
}
