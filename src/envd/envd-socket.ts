import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { reapDeadOwners } from '../sandbox/host/owned-dirs.js';

const PREFIX = 'agent-runner-envd-';
/** A worker's envd directory, by the worker's pid. */
const ENVD_DIR = /^agent-runner-envd-(\d+)-[^/]+$/;

/**
 * Where the worker process's envd listens: a unix socket in a directory of its own (mode 0700,
 * named by the worker's pid and a fresh suffix), so only this host's root reaches it and several
 * agent-runner processes on one host never share one. The front door forwards sandbox traffic to it.
 * A worker that was killed could not remove its directory: the next one removes those of dead pids.
 */
export async function listenEnvd(server: Server): Promise<{ socketPath: string; close(): Promise<void> }> {
  await reapDeadOwners(tmpdir(), (name) => Number(ENVD_DIR.exec(name)?.[1]));
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
