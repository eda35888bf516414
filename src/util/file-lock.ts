import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { forkWhenQuiet } from './fork-gate.js';

/**
 * An flock(2) on `path`, shared or exclusive, held by a small `flock ... cat` child: the kernel
 * releases it when that child ends, which it does when the release closes its stdin or when this
 * process dies, however it dies. So it orders the processes of a host that share a directory
 * (a service's front door and its worker), and no crash leaves it held. Waits until it is taken.
 */
export async function lockFile(path: string, mode: 'shared' | 'exclusive'): Promise<() => void> {
  // Made if missing, never truncated: the lock is the file's, not its bytes'.
  closeSync(openSync(path, 'a', 0o600));
  const holder = await forkWhenQuiet(() => spawn('/usr/bin/flock', [`--${mode}`, path, '/bin/sh', '-c', 'echo held; exec cat'], { env: {}, stdio: ['pipe', 'pipe', 'pipe'] }));
  let said = '';
  holder.stderr.on('data', (chunk: Buffer) => (said += chunk.toString()));
  return await new Promise((resolve, reject) => {
    holder.once('error', reject);
    holder.stdout.once('data', () => resolve(() => holder.stdin.end()));
    holder.once('exit', (code) => reject(new Error(`flock ${path} exited ${code} before it held the lock: ${said.trim()}`)));
  });
}

/** `work` while holding the lock on `path`. */
export async function withFileLock<T>(path: string, mode: 'shared' | 'exclusive', work: () => Promise<T>): Promise<T> {
  const release = await lockFile(path, mode);
  try {
    return await work();
  } finally {
    release();
  }
}
