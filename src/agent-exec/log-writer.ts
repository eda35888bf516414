import { open, rename, type FileHandle } from 'node:fs/promises';
import type { JobPaths } from './job-store.js';
import { truncationMark, windowStart } from './log-window.js';

export type StreamName = 'stdout' | 'stderr';

const NEWLINE = Buffer.from('\n');
/** Copying the kept part of a log goes through a buffer this big, whatever the cap. */
const COPY_CHUNK = 1024 * 1024;

/**
 * The supervisor's side of the logs: each chunk goes to its stream's log as is, and to
 * full.log with every line prefixed "<ISO time> <stream> ". Chunks are written as they come
 * and each append resolves once on disk, so the pipe is read no faster than the disk takes it
 * and nothing piles up in memory however much the job prints. Each log is capped (CappedLog):
 * past the cap its oldest bytes give way to a truncation mark and the newest are kept.
 */
export class LogWriter {
  private lastStream: StreamName | null = null;
  private atLineStart = true;
  /** full.log takes both streams: its writes are queued so lines land in arrival order. */
  private fullQueue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly streams: Record<StreamName, CappedLog>,
    private readonly full: CappedLog,
  ) {}

  /** `cap`: bytes kept of each log; `key`: the job's log key (log-window.ts). */
  static async open(paths: JobPaths, cap: number, key: string): Promise<LogWriter> {
    const [stdout, stderr, full] = await Promise.all([paths.stdout, paths.stderr, paths.full].map((path) => CappedLog.open(path, cap, key)));
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

/**
 * One log file that never grows past `cap` bytes. While the output fits it is appended as is.
 * A write that would pass the cap starts a new window: the newest half of the cap is kept
 * behind a truncation mark, written to a new file that then replaces the log (rename), so a
 * reader always opens one whole window, never one being rewritten. Offsets are those of the
 * whole stream (log-window.ts). Rewriting half the cap per half the cap written costs one
 * extra write per byte; copying goes through a fixed buffer, so memory stays flat.
 */
export class CappedLog {
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly path: string,
    private readonly cap: number,
    private readonly key: string,
    private handle: FileHandle,
    /** Stream offset of the file's first byte. */
    private start: number,
    private size: number,
  ) {}

  static async open(path: string, cap: number, key: string): Promise<CappedLog> {
    const handle = await open(path, 'a+', 0o600);
    const size = (await handle.stat()).size;
    return new CappedLog(path, cap, key, handle, await windowStart(handle, size, key), size);
  }

  /** Writes in call order; each resolves once its bytes are in the file. */
  write(chunk: Buffer): Promise<void> {
    const written = this.queue.then(() => this.append(chunk));
    this.queue = written.catch(() => undefined);
    return written;
  }

  async close(): Promise<void> {
    await this.queue;
    await this.handle.close();
  }

  private async append(chunk: Buffer): Promise<void> {
    if (this.size + chunk.length <= this.cap) {
      await this.writeAll(this.handle, chunk);
      this.size += chunk.length;
      return;
    }
    const end = this.start + this.size + chunk.length;
    const keep = Math.floor(this.cap / 2);
    // The kept output is [dropped, end) of the stream; the mark stands in for the bytes just before it.
    const dropped = end - keep;
    const mark = truncationMark(this.key, dropped, this.cap);
    const temp = `${this.path}.window`;
    const next = await open(temp, 'w+', 0o600);
    try {
      await this.writeAll(next, mark);
      const fileEnd = this.start + this.size;
      // What is kept of the file: the stream from `dropped` to the file's end (the old mark never).
      let from = Math.max(dropped, this.start) - this.start;
      const copy = Buffer.alloc(Math.min(COPY_CHUNK, Math.max(0, this.size - from)));
      while (from < this.size) {
        const { bytesRead } = await this.handle.read(copy, 0, Math.min(copy.length, this.size - from), from);
        if (bytesRead === 0) break;
        await this.writeAll(next, copy.subarray(0, bytesRead));
        from += bytesRead;
      }
      await this.writeAll(next, chunk.subarray(Math.max(0, dropped - fileEnd)));
      await rename(temp, this.path);
    } catch (error) {
      await next.close();
      throw error;
    }
    await this.handle.close();
    this.handle = next;
    this.start = dropped - mark.length;
    this.size = mark.length + keep;
  }

  private async writeAll(handle: FileHandle, bytes: Buffer): Promise<void> {
    let offset = 0;
    while (offset < bytes.length) offset += (await handle.write(bytes, offset, bytes.length - offset)).bytesWritten;
  }
}
