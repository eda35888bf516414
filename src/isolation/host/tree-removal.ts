import { Worker } from 'node:worker_threads';
import { mountPointsUnder } from './tmpfs.js';

/**
 * Deletes trees a job could fill (its work dir, its staging) on a thread of their own: a job
 * that leaves 10^6 files costs that thread seconds, never the event loop that answers
 * callers. rmSync, like rm -r, removes links and never follows them.
 */
const THREAD_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { rmSync } = require('node:fs');
parentPort.on('message', ({ id, path }) => {
  let error = null;
  try {
    rmSync(path, { recursive: true, force: true });
  } catch (caught) {
    error = caught instanceof Error ? caught.message : String(caught);
  }
  parentPort.postMessage({ id, error });
});
`;

let thread: Worker | null = null;
let nextId = 1;
const pending = new Map<number, { resolve: () => void; reject: (error: Error) => void }>();

function removalThread(): Worker {
  if (thread) return thread;
  const started = new Worker(THREAD_SOURCE, { eval: true });
  started.on('message', ({ id, error }: { id: number; error: string | null }) => {
    const waiter = pending.get(id);
    pending.delete(id);
    if (error === null) waiter?.resolve();
    else waiter?.reject(new Error(error));
    // An idle thread must not keep the process alive.
    if (pending.size === 0) started.unref();
  });
  started.on('error', (error) => {
    for (const waiter of pending.values()) waiter.reject(error);
    pending.clear();
    thread = null;
  });
  thread = started;
  return started;
}

/**
 * Removes `path` and what is in it, on the removal thread. Refused (rejects) while anything is
 * mounted beneath it: rm -r walks into mounts, and what is mounted there (a volume bound into a
 * VM's share, volumes/volume-store.ts) is never removed with a tree; its owner unmounts first.
 */
export async function removeTree(path: string): Promise<void> {
  const mounted = await mountPointsUnder(path);
  if (mounted.length > 0) throw new Error(`${path} is not removed: ${mounted.join(', ')} ${mounted.length === 1 ? 'is' : 'are'} mounted in it`);
  const worker = removalThread();
  const id = nextId++;
  worker.ref();
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, path });
  });
}
