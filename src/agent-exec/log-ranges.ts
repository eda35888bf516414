import { isUtf8 } from 'node:buffer';
import { open } from 'node:fs/promises';
import { windowStart } from './log-window.js';

/**
 * Reads one byte range of a log, never the whole file: logs can be far larger than memory,
 * and an agent pages through them by the ranges each response reports. Offsets are those of
 * the job's whole stream: a log capped at --max-log-bytes holds only its newest part, from
 * `start` on (log-window.ts), and a range never reaches before that.
 */

export interface Excerpt {
  bytes: Buffer;
  /** [start, end) byte offsets of `bytes` in the log. */
  range: [number, number];
  /** The log's size when it was read: every byte the job wrote to it, kept or not. */
  total: number;
  /** The first offset the log still holds (absent: 0, nothing was dropped). */
  start?: number;
}

export interface RangeRequest {
  /** Where to start; null for the last `maxBytes` of the log. */
  offset: number | null;
  maxBytes: number;
  /** The log will not grow (the job is over): a partial character at its very end is final. */
  settled: boolean;
  /** The job's log key, which finds a capped log's truncation mark; null or absent: the file is the whole log. */
  key?: string | null;
}

/** Where a log's kept part starts and where it ends, both as offsets of the whole stream. */
export async function logExtent(path: string, key: string | null): Promise<{ start: number; total: number }> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { start: 0, total: 0 };
    throw error;
  }
  try {
    const size = (await handle.stat()).size;
    const start = await windowStart(handle, size, key);
    return { start, total: start + size };
  } finally {
    await handle.close();
  }
}

export async function readExcerpt(path: string, request: RangeRequest): Promise<Excerpt> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { bytes: Buffer.alloc(0), range: [0, 0], total: 0 };
    throw error;
  }
  try {
    // One open file: a log replaced by a newer window meanwhile is read as it was, mark included.
    const size = (await handle.stat()).size;
    const kept = await windowStart(handle, size, request.key ?? null);
    const total = kept + size;
    let start = request.offset === null ? Math.max(kept, total - request.maxBytes) : Math.min(Math.max(request.offset, kept), total);
    const end = Math.min(total, start + request.maxBytes);
    const buffer = Buffer.alloc(end - start);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, start - kept);
    let bytes = buffer.subarray(0, bytesRead);
    // A tail window opens wherever the byte count falls; start it on a character instead.
    // An explicit offset is the caller's (usually the previous range's end) and is kept.
    if (request.offset === null && start > kept) {
      const skip = leadingContinuationBytes(bytes);
      bytes = bytes.subarray(skip);
      start += skip;
    }
    // A character cut by the range end (or still being written) is left for the next page.
    if (start + bytes.length < total || !request.settled) bytes = bytes.subarray(0, completeLength(bytes));
    return { bytes, range: [start, start + bytes.length], total, ...(kept > 0 ? { start: kept } : {}) };
  } finally {
    await handle.close();
  }
}

const isContinuation = (byte: number) => (byte & 0xc0) === 0x80;

function leadingContinuationBytes(bytes: Buffer): number {
  let count = 0;
  while (count < 3 && count < bytes.length && isContinuation(bytes[count]!)) count++;
  return count;
}

/** The length without a trailing, incomplete multi-byte sequence (kept if it is all there is). */
function completeLength(bytes: Buffer): number {
  for (let back = 1; back <= Math.min(4, bytes.length); back++) {
    const byte = bytes[bytes.length - back]!;
    if (isContinuation(byte)) continue;
    const needed = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    const cut = needed > back && back < bytes.length;
    return cut ? bytes.length - back : bytes.length;
  }
  return bytes.length;
}

/** The last `lines` lines of `bytes` (a final newline does not start an empty line). */
export function lastLines(bytes: Buffer, lines: number): Buffer {
  if (lines <= 0) return bytes.subarray(bytes.length);
  let position = bytes.length - (bytes[bytes.length - 1] === 0x0a ? 1 : 0);
  for (let seen = 0; seen < lines; seen++) {
    if (position === 0) return bytes;
    const newline = bytes.lastIndexOf(0x0a, position - 1);
    if (newline === -1) return bytes;
    position = newline;
  }
  return bytes.subarray(position + 1);
}

/** Invalid UTF-8 is decoded with U+FFFD in its place and said so, so the JSON stays valid. */
export function encodingOf(...parts: Buffer[]): 'utf-8' | 'utf-8-lossy' {
  return parts.every((bytes) => isUtf8(bytes)) ? 'utf-8' : 'utf-8-lossy';
}
