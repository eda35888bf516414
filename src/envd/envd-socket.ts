import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const PREFIX = 'agent-runner-envd-';

/**
 * Where the worker process's envd listens: a unix socket in a directory of its own (mode 0700,
 * named by the worker's pid and a fresh suffix), so only this host's root reaches it and several
 * agent-runner processes on one host never share one. The front door forwards sandbox traffic to it.
 * A worker that was killed could not remove its directory: the next one removes those of dead pids.
 */
export async function listenEnvd(server: Server): Promise<{ socketPath: string; close(): Promise<void> }> {
  removeDeadWorkersDirs();
  const dir = mkdtempSync(join(tmpdir(), `${PREFIX}${process.pid}-`));
  const socketPath = join(dir, 'envd.sock');
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  let closed: Promise<void> | undefined;
  return {
    socketPath,
    close: () =>
      (closed ??= (async () => {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        rmSync(dir, { recursive: true, force: true });
      })()),
  };
}

/** Our uid's envd directories whose worker is no longer alive (a pid that lives again keeps its directory: it may be another worker's). */
function removeDeadWorkersDirs(): void {
  const uid = process.getuid?.();
  for (const name of readdirSync(tmpdir())) {
    const pid = Number(/^agent-runner-envd-(\d+)-[^/]+$/.exec(name)?.[1]);
    if (!pid || alive(pid)) continue;
    const path = join(tmpdir(), name);
    try {
      const stat = lstatSync(path);
      if (stat.isDirectory() && stat.uid === uid) rmSync(path, { recursive: true, force: true });
    } catch {
      // Removed meanwhile by another worker doing the same.
    }
  }
}

/** A process that has not exited (a zombie has: only its parent's wait is left). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}
