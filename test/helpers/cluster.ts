import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { spawnLogged } from './server.js';

const CLI = fileURLToPath(new URL('../../dist/cli/agent-runner.js', import.meta.url));

export interface WorkerProcessHandle {
  child: ChildProcess;
  workerId: string;
  logs: string[];
  exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL if it has not left after `graceMs` more. */
  stop(graceMs?: number): Promise<void>;
}

/** Starts a real `agent-runner worker` on `url` and waits until it has joined the cluster. */
export async function startWorker(url: string, concurrency: number, env: NodeJS.ProcessEnv = {}): Promise<WorkerProcessHandle> {
  const {
    child,
    logs,
    exited,
    ready: workerId,
  } = await spawnLogged([CLI, 'worker', '--database', url, '--concurrency', String(concurrency), '--grace-ms', '2000'], env, (entry) =>
    entry.msg === 'agent-runner worker running' && typeof entry.worker_id === 'string' ? entry.worker_id : undefined,
  );
  return {
    child,
    workerId,
    logs,
    exited,
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(killer);
    },
  };
}
