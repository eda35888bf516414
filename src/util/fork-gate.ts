/**
 * Keeps forks away from files being written for a job. A program staged for exec is written
 * through an fd; a fork while that fd is open gives the child a copy until it execs, and the
 * job's execve then fails with ETXTBSY ("Text file busy"), the race every runtime that writes
 * and runs binaries meets. Staged writes run inside `whileWriting`; every fork goes through
 * `forkWhenQuiet`, which forks in the same synchronous step as its last check.
 */
import { execFile, spawn } from 'node:child_process';
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

/**
 * execFile, promised, through the gate: what a module that runs host tools (probes, image builds)
 * calls `run`. With a `signal`, the tool starts a process group of its own (a shell's pipeline
 * is in it) and an abort kills the whole group: nothing it started runs on. The promise then
 * rejects with the signal's reason. `input` is its stdin. `maxBuffer` and `timeout` bound a tool
 * run without a signal or input; one with them is bounded by whoever aborts the signal.
 */
export async function execFileWhenQuiet(
  file: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; maxBuffer?: number; timeout?: number; signal?: AbortSignal; input?: string } = {},
): Promise<{ stdout: string; stderr: string }> {
  const { signal, input, ...rest } = options;
  if (signal === undefined && input === undefined) return await forkWhenQuiet(() => execFileAsync(file, [...args], { ...rest, encoding: 'utf8' }));
  signal?.throwIfAborted();
  return await forkWhenQuiet(() => inGroup(file, args, rest.env, input ?? '', signal));
}

/** spawn (execFile passes no `detached` on), its output collected; `signal` kills its process group. */
function inGroup(
  file: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv | undefined,
  input: string,
  signal: AbortSignal | undefined,
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, [...args], { env, detached: signal !== undefined, stdio: ['pipe', 'pipe', 'pipe'] });
    const killGroup = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // Gone already.
      }
    };
    signal?.addEventListener('abort', killGroup, { once: true });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    child.stdin.on('error', () => undefined);
    child.stdin.end(input);
    child.on('error', (error) => {
      signal?.removeEventListener('abort', killGroup);
      reject(error);
    });
    child.on('close', (code, killedBy) => {
      signal?.removeEventListener('abort', killGroup);
      const said = { stdout: Buffer.concat(stdout).toString('utf8'), stderr: Buffer.concat(stderr).toString('utf8') };
      if (signal?.aborted) reject(signal.reason as Error);
      else if (code === 0) resolve(said);
      else reject(Object.assign(new Error(`${file} ${args.join(' ')} failed (${killedBy ?? `exit ${code}`}): ${said.stderr.trim()}`), said));
    });
  });
}
