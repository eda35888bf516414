import { isUtf8 } from 'node:buffer';
import { open } from 'node:fs/promises';

/**
 * Reads one byte range of a log, never the whole file: logs can be far larger than memory,
 * and an agent pages through them by the ranges each response reports.
 */

export interface Excerpt {
  bytes: Buffer;
  /** [start, end) byte offsets of `bytes` in the log. */
  range: [number, number];
  /** The log's size when it was read. */
  total: number;
}

export interface RangeRequest {
  /** Where to start; null for the last `maxBytes` of the log. */
  offset: number | null;
  maxBytes: number;
  /** The log will not grow (the job is over): a partial character at its very end is final. */
  settled: boolean;
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
    const total = (await handle.stat()).size;
    let start = request.offset === null ? Math.max(0, total - request.maxBytes) : Math.min(request.offset, total);
    const end = Math.min(total, start + request.maxBytes);
    const buffer = Buffer.alloc(end - start);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, start);
    let bytes = buffer.subarray(0, bytesRead);
    // A tail window opens wherever the byte count falls; start it on a character instead.
    // An explicit offset is the caller's (usually the previous range's end) and is kept.
    if (request.offset === null && start > 0) {
      const skip = leadingContinuationBytes(bytes);
      bytes = bytes.subarray(skip);
      start += skip;
    }
    // A character cut by the range end (or still being written) is left for the next page.
    if (start + bytes.length < total || !request.settled) bytes = bytes.subarray(0, completeLength(bytes));
    return { bytes, range: [start, start + bytes.length], total };
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
