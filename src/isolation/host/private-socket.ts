import { mkdtempSync, rmSync } from 'node:fs';
import type { Server as HttpServer } from 'node:http';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { reapDeadOwners } from './owned-dirs.js';

/** The most bytes of a unix socket's path (sockaddr_un's sun_path, less its terminating NUL). */
const SUN_PATH_BYTES = 107;

/**
 * `server` listening on a unix socket in a directory of its own under the temporary directory
 * (mode 0700, named `agent-runner-<name>-<pid>-<suffix>`, the socket `s` in it), so only this host's root reaches it
 * and several agent-runner processes on one host never share one: a worker's envd, which its
 * front door forwards sandbox traffic to; a front door's, which its worker sends back what comes
 * on a connection handed over that is not a sandbox's. A process that was killed could not remove
 * its directory: the next one of that name removes those of dead pids.
 */
export async function listenPrivateSocket(server: Server, name: string): Promise<{ socketPath: string; close(): Promise<void> }> {
  const prefix = `agent-runner-${name}-`;
  const owned = new RegExp(`^${prefix}(\\d+)-[^/]+$`);
  await reapDeadOwners(tmpdir(), (entry) => Number(owned.exec(entry)?.[1]));
  const dir = mkdtempSync(join(tmpdir(), `${prefix}${process.pid}-`));
  // A one-letter name: a unix socket's path has at most SUN_PATH_BYTES, and a longer one would be
  // cut short by the kernel's sockaddr (bound, then, outside the private directory).
  const socketPath = join(dir, 's');
  if (Buffer.byteLength(socketPath) > SUN_PATH_BYTES) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`the unix socket path ${socketPath} is longer than ${SUN_PATH_BYTES} bytes: set TMPDIR to a shorter directory`);
  }
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
        if ('closeAllConnections' in server) (server as HttpServer).closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        rmSync(dir, { recursive: true, force: true });
      })()),
  };
}
