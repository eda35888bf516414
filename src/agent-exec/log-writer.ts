import { open, type FileHandle } from 'node:fs/promises';
import type { JobPaths } from './job-store.js';

export type StreamName = 'stdout' | 'stderr';

const NEWLINE = Buffer.from('\n');

/**
 * The supervisor's side of the logs: each chunk goes to its stream's log as is, and to
 * full.log with every line prefixed "<ISO time> <stream> ". Chunks are written as they come
 * and each append resolves once on disk, so the pipe is read no faster than the disk takes it
 * and nothing piles up in memory however much the job prints.
 */
export class LogWriter {
  private lastStream: StreamName | null = null;
  private atLineStart = true;
  /** full.log takes both streams: its writes are queued so lines land in arrival order. */
  private fullQueue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly streams: Record<StreamName, FileHandle>,
    private readonly full: FileHandle,
  ) {}

  static async open(paths: JobPaths): Promise<LogWriter> {
    const [stdout, stderr, full] = await Promise.all([paths.stdout, paths.stderr, paths.full].map((path) => open(path, 'a', 0o600)));
    return new LogWriter({ stdout: stdout!, stderr: stderr! }, full!);
  }

  async append(stream: StreamName, chunk: Buffer): Promise<void> {
    const framed = this.frame(stream, chunk);
    const full = this.fullQueue.then(() => this.full.write(framed));
    this.fullQueue = full.catch(() => undefined);
    await Promise.all([this.streams[stream].write(chunk), full]);
  }

  async close(): Promise<void> {
    await this.fullQueue;
    await Promise.all([this.streams.stdout.close(), this.streams.stderr.close(), this.full.close()]);
  }

  /** One timestamp per chunk: it is when the bytes arrived, which is all a chunk tells. */
  private frame(stream: StreamName, chunk: Buffer): Buffer {
    const prefix = Buffer.from(`${new Date().toISOString()} ${stream} `);
    const parts: Buffer[] = [];
    // The other stream's unfinished line ends here, or two streams would share one line.
    if (!this.atLineStart && this.lastStream !== stream) {
      parts.push(NEWLINE);
      this.atLineStart = true;
    }
    let start = 0;
    while (start < chunk.length) {
      if (this.atLineStart) parts.push(prefix);
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline + 1;
      parts.push(chunk.subarray(start, end));
      this.atLineStart = newline !== -1;
      start = end;
    }
    this.lastStream = stream;
    return Buffer.concat(parts);
  }
}
