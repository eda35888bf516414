/**
 * Keeps forks away from files being written for a job. A program staged for exec is written
 * through an fd; a fork while that fd is open gives the child a copy until it execs, and the
 * job's execve then fails with ETXTBSY ("Text file busy"), the race every runtime that writes
 * and runs binaries meets. Staged writes run inside `whileWriting`; every fork goes through
 * `forkWhenQuiet`, which forks in the same synchronous step as its last check.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

let writes = 0;
const waiters: Array<() => void> = [];

export async function whileWriting<T>(write: () => Promise<T>): Promise<T> {
  writes += 1;
  try {
    return await write();
  } finally {
    writes -= 1;
    if (writes === 0) for (const resolve of waiters.splice(0)) resolve();
  }
}

/** Calls `fork` (which must fork synchronously, as spawn and execFile do) once no staged write is open. */
export async function forkWhenQuiet<T>(fork: () => T): Promise<T> {
  while (writes > 0) await new Promise<void>((resolve) => waiters.push(resolve));
  return fork();
}

const execFileAsync = promisify(execFile);

/** execFile, promised, through the gate: what a module that runs host tools (probes, image builds) calls `run`. */
export async function execFileWhenQuiet(
  file: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; maxBuffer?: number; timeout?: number } = {},
): Promise<{ stdout: string; stderr: string }> {
  return await forkWhenQuiet(() => execFileAsync(file, [...args], { ...options, encoding: 'utf8' }));
}
