import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls until `condition` holds: how a test waits for something to happen instead of sleeping
 * for a guessed time. The bound only turns "never" into a failure instead of a hang; it is far
 * above what any run under load needs, and no assertion depends on it.
 */
export async function waitUntil(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; ; await sleep(50)) {
    if (await condition()) return;
    if (Date.now() >= deadline) throw new Error(`gave up after ${timeoutMs} ms waiting until ${what}`);
  }
}
