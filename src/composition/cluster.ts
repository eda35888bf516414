import type { RunnerRuntime } from '../runner/runtime.js';
import { WorkerLoop } from '../jobs/worker-loop.js';
import { WorkerProcess, type LogSink } from '../jobs/worker-process.js';
import { ClusterFrontDoor, type ClusterFrontDoorOptions } from '../postgres/cluster-front-door.js';
import { Cluster } from '../postgres/cluster.js';
import { ClusterSessions } from '../postgres/cluster-sessions.js';
import { ClusterSandboxes } from '../postgres/cluster-sandboxes.js';
import { Owners } from '../postgres/owners.js';
import { WorkerNode } from '../postgres/worker-node.js';
import type { DeskAndWorker } from './desk-and-worker.js';

/**
 * `serve --database URL`: a cluster front door, and beside it a worker process with `slots`
 * job slots (0: it only runs the synchronous snippets and tasks this front door is asked for,
 * and the sessions made through it, which the other front doors forward to it).
 */
export async function startClusterFrontDoor(options: {
  url: string;
  runtime: RunnerRuntime;
  slots: number;
  desk: Omit<ClusterFrontDoorOptions, 'log'>;
  /** This front door's URL as the others reach it (known once it listens), and the token they send. */
  address: () => string;
  token: string | null;
  log: LogSink;
}): Promise<DeskAndWorker> {
  const cluster = new Cluster(options.url, options.runtime, { applicationName: 'agent-runner-serve' });
  await cluster.open();
  const desk = new ClusterFrontDoor(cluster, { ...options.desk, log: options.log });
  await desk.start();
  const node = new WorkerNode(cluster, options.log);
  const worker = await WorkerProcess.start({
    config: options.runtime.config,
    slots: options.slots,
    ports: node.ports,
    onLost: (jobIds) => node.giveBack(jobIds),
    log: options.log,
  });
  if (options.slots > 0) await node.join(options.slots, () => worker.backends());
  const { lifetimeSeconds, endedRetentionSeconds } = options.runtime.config.sessions;
  const owners = new Owners(cluster.db, 'session_owners', lifetimeSeconds + endedRetentionSeconds);
  const sandboxSettings = options.runtime.config.sandboxes;
  // A paused sandbox is reached through its owner for as long as its state is kept.
  const sandboxLife = Math.max(sandboxSettings.maxTimeoutSeconds, sandboxSettings.keptRetentionDays * 24 * 3600);
  const sandboxOwners = new Owners(cluster.db, 'sandbox_owners', sandboxLife + sandboxSettings.endedRetentionSeconds);
  return {
    desk,
    worker,
    sessions: new ClusterSessions(worker.sessions, owners, options.address, options.token),
    sandboxes: new ClusterSandboxes(
      worker.sandboxes,
      sandboxOwners,
      options.address,
      options.token,
      Object.fromEntries(Object.entries(options.runtime.config.service.apiKeys).map(([name, key]) => [name, key.maxSandboxes ?? null])),
    ),
    async drain(graceMs) {
      desk.close();
      await node.leave({ stopped: () => worker.stop(), cancelAll: () => worker.cancelAll() }, graceMs);
      await cluster.close();
    },
  };
}

/** `agent-runner worker --database URL`: job slots in this process, on any machine that reaches the database. */
export async function startClusterWorker(options: {
  url: string;
  runtime: RunnerRuntime;
  slots: number;
  log: LogSink;
}): Promise<{ workerId: string; drain(graceMs: number): Promise<void> }> {
  const { runtime } = options;
  const cluster = new Cluster(options.url, runtime, { applicationName: 'agent-runner-worker' });
  await cluster.open();
  const node = new WorkerNode(cluster, options.log);
  const loop = new WorkerLoop(node.ports, runtime, options.slots, options.log);
  // A guest image build takes minutes on a new machine: the worker joins with the kinds ready
  // now, and offers the others as they become ready (WorkerNode.join).
  runtime.backends.prepareInBackground();
  await node.join(options.slots, () => runtime.backends.describe());
  loop.start();
  return {
    workerId: node.workerId,
    async drain(graceMs) {
      await node.leave(loop, graceMs);
      await cluster.close();
      await runtime.dispose();
    },
  };
}
