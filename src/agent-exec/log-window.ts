import type { FileHandle } from 'node:fs/promises';

/**
 * A capped log keeps the newest bytes of its stream. Offsets stay those of the whole stream
 * (byte N is the N-th byte the job wrote, whatever was dropped since), so a page an agent read
 * means the same bytes on every later read. Once output went past the cap the file holds the
 * window [start, total) of the stream: a truncation mark standing in for the last dropped
 * bytes, then the newest output. The mark is the file's first line:
 *
 *   [agent-exec log <key>] the first <D> bytes of output were dropped at the cap of <C> bytes; the newest follow.
 *
 * <D> is where the output resumes, so the window starts at D minus the mark's length. The key
 * is the job's (job.json, which the job cannot read): a job that prints a mark of its own
 * cannot move its log's offsets.
 */

/** The mark is short; only this much of a log's head is read to find it. */
const MARK_MAX_BYTES = 512;

export function truncationMark(key: string, dropped: number, cap: number): Buffer {
  return Buffer.from(`${markPrefix(key)}the first ${dropped} bytes of output were dropped at the cap of ${cap} bytes; the newest follow.\n`);
}

function markPrefix(key: string): string {
  return `[agent-exec log ${key}] `;
}

/**
 * The stream offset of the file's first byte: 0 for a log that never reached its cap (or a job
 * without a key), else read from the mark.
 */
export async function windowStart(handle: FileHandle, size: number, key: string | null): Promise<number> {
  if (key === null || size === 0) return 0;
  const head = Buffer.alloc(Math.min(size, MARK_MAX_BYTES));
  const { bytesRead } = await handle.read(head, 0, head.length, 0);
  return startFromHead(head.subarray(0, bytesRead), key);
}

export function startFromHead(head: Buffer, key: string): number {
  const prefix = Buffer.from(markPrefix(key));
  if (head.length < prefix.length || !head.subarray(0, prefix.length).equals(prefix)) return 0;
  const end = head.indexOf(0x0a);
  if (end === -1) return 0;
  const match = /the first (\d+) bytes/.exec(head.subarray(prefix.length, end).toString('utf8'));
  if (!match) return 0;
  const start = Number(match[1]) - (end + 1);
  return Number.isSafeInteger(start) && start >= 0 ? start : 0;
}
