import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** The bound (60 s unless given). */
  timeoutMs?: number;
  /** What the test saw meanwhile (a server's reply, a child's stderr), quoted when the wait gives up. */
  seen?: () => string;
}

/**
 * Polls until `condition` holds: how a test waits for something to happen instead of sleeping
 * for a guessed time. The bound only turns "never" into a failure instead of a hang; it is far
 * above what any run under load needs, and no assertion depends on it. A wait that gives up says
 * what it saw, so the failure explains itself without a rerun.
 */
export async function waitUntil(condition: () => boolean | Promise<boolean>, what: string, options: number | WaitOptions = {}): Promise<void> {
  const { timeoutMs = 60_000, seen } = typeof options === 'number' ? { timeoutMs: options } : options;
  for (const deadline = Date.now() + timeoutMs; ; await sleep(50)) {
    if (await condition()) return;
    if (Date.now() >= deadline) throw new Error(`gave up after ${timeoutMs} ms waiting until ${what}${seen ? `; saw: ${seen()}` : ''}`);
  }
}
