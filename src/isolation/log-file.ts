import { createWriteStream, type WriteStream } from 'node:fs';
import type { OutputSink } from './types.js';

/** A stream's full log on disk, written as it arrives, that stops growing at `maxBytes`. */
export class LogFile implements OutputSink {
  private readonly stream: WriteStream;
  private written = 0;
  private failure: Error | null = null;

  constructor(
    readonly path: string,
    private readonly maxBytes: number,
  ) {
    this.stream = createWriteStream(path, { flags: 'w', mode: 0o600 });
    this.stream.on('error', (error) => (this.failure ??= error));
  }

  write(chunk: Buffer): void {
    const room = this.maxBytes - this.written;
    if (room <= 0 || this.failure) return;
    const slice = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.written += slice.length;
    this.stream.write(slice);
  }

  /** Flushes to disk; rejects with the first write error, if any. */
  close(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.stream.end(() => (this.failure ? reject(this.failure) : resolve()));
    });
  }
}

/** One producer, several consumers (the capped capture and the log). */
export function teeSinks(...sinks: OutputSink[]): OutputSink {
  return { write: (chunk) => sinks.forEach((sink) => sink.write(chunk)) };
}
