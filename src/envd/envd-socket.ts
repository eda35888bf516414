import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Where the worker process's envd listens: a unix socket in a directory of its own (mode 0700,
 * a fresh name per process), so only this host's root reaches it and several agent-runner
 * processes on one host never share one. The front door forwards sandbox traffic to it.
 */
export async function listenEnvd(server: Server): Promise<{ socketPath: string; close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-runner-envd-'));
  const socketPath = join(dir, 'envd.sock');
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    socketPath,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
