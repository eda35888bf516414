import { stat, utimes, writeFile } from 'node:fs/promises';

/**
 * Retention, for every place runs pile up (the service's run store, agent-exec jobs, the runs
 * kept under the state dir): which ended entries go, and when an automatic pass is due.
 */

const DAY_MS = 86_400_000;

/** Ended entries older than maxAgeMs go; beyond maxCount entries, the oldest ended ones go. null: no bound. */
export interface RetentionPolicy {
  maxAgeMs: number | null;
  maxCount: number | null;
}

/** The configuration speaks in days. */
export function retentionPolicy(settings: { maxAgeDays: number | null; maxCount: number | null }): RetentionPolicy {
  return { maxAgeMs: settings.maxAgeDays === null ? null : settings.maxAgeDays * DAY_MS, maxCount: settings.maxCount };
}

export interface Retainable {
  id: string;
  /** When it began (ms since the epoch): beyond the count, the oldest go first. */
  bornAt: number;
  /** When it ended; null while it may still be going, which nothing here may delete. */
  endedAt: number | null;
}

export type ExpiryReason = 'age' | 'count';

/**
 * What the policy lets go, oldest first. Entries still going are never chosen, but they count:
 * the limit is on what is kept, so too many live ones push out every ended one.
 */
export function expired<T extends Retainable>(entries: readonly T[], policy: RetentionPolicy, now = Date.now()): Array<{ entry: T; reason: ExpiryReason }> {
  const ended = entries.filter((entry) => entry.endedAt !== null).sort((a, b) => a.bornAt - b.bornAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const overCount = policy.maxCount === null ? 0 : Math.max(0, entries.length - policy.maxCount);
  const cutoff = policy.maxAgeMs === null ? null : now - policy.maxAgeMs;
  return ended.flatMap((entry, position) => {
    const reason: ExpiryReason | null = cutoff !== null && entry.endedAt! < cutoff ? 'age' : position < overCount ? 'count' : null;
    return reason === null ? [] : [{ entry, reason }];
  });
}

/**
 * Whether an automatic pass is due. The stamp's mtime is when the next one is (set ahead by
 * deferPass), so asking costs one stat and no configuration: a caller loads its policy only
 * when there is work to do.
 */
export async function passDue(stamp: string, now = Date.now()): Promise<boolean> {
  const next = await stat(stamp).then(
    (info) => info.mtimeMs,
    () => 0,
  );
  return next <= now;
}

/** Moves the next pass `intervalMs` ahead; done before a pass, so callers arriving meanwhile skip theirs. */
export async function deferPass(stamp: string, intervalMs: number, now = Date.now()): Promise<void> {
  const next = new Date(now + intervalMs);
  await writeFile(stamp, '', { flag: 'a', mode: 0o600 });
  await utimes(stamp, next, next);
}
