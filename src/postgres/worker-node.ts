import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { BackendDescription } from '../contract/backend.js';
import { MAX_ATTEMPTS, type Cluster } from './cluster.js';
import { ClusterWorkerPorts, type ClusterLog } from './worker-ports.js';

/** What runs the jobs a node leases: the in-process WorkerLoop, or a WorkerProcess beside a front door. */
export interface JobRunner {
  /** Resolves once every slot saw leasing stop and recorded what it ran. */
  stopped(): Promise<void>;
  cancelAll(): void;
}

/**
 * A worker's membership of the cluster: its id, its ports, its heartbeat, and how it leaves.
 * Shared by `agent-runner worker` and the job slots `serve --workers N` runs beside a front door.
 */
export class WorkerNode {
  readonly workerId = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  readonly ports: ClusterWorkerPorts;

  constructor(
    private readonly cluster: Cluster,
    private readonly log: ClusterLog,
  ) {
    this.ports = new ClusterWorkerPorts(cluster, this.workerId, join(cluster.runtime.config.stateDir, 'runtime', 'cluster-runs', this.workerId), log);
  }

  /** Registers with the kinds this worker can run now: admission refuses jobs for kinds no live worker offers. */
  async join(slots: number, backends: readonly BackendDescription[]): Promise<void> {
    const kinds = backends.filter((backend) => backend.available).map((backend) => backend.kind);
    await this.cluster.registry.join({ workerId: this.workerId, slots, kinds });
    this.log.info({ worker_id: this.workerId, slots, kinds }, 'worker joined the cluster');
  }

  /** Jobs of this node whose runner died: back to the queue now, for any worker. */
  giveBack(jobIds: readonly string[]): Promise<void> {
    return this.cluster.registry.giveBack(this.workerId, jobIds, MAX_ATTEMPTS, this.cluster.giveUp);
  }

  /**
   * Stops leasing and lets running jobs finish for `graceMs`. Jobs still running then go back
   * to the queue (another worker runs them again) and are stopped here; their results, come
   * too late, are discarded. Then the node leaves the registry.
   */
  async leave(runner: JobRunner, graceMs: number): Promise<void> {
    this.ports.stop();
    const graceOver = setTimeout(() => {
      const held = this.ports.heldJobs();
      if (held.length > 0) this.log.info({ jobs: held }, 'grace over: jobs still running go back to the queue');
      void this.giveBack(held)
        .catch((error: Error) => this.log.error({ err: error, jobs: held }, 'jobs could not be given back; they return once this worker is presumed dead'))
        .finally(() => runner.cancelAll());
    }, graceMs);
    await runner.stopped();
    clearTimeout(graceOver);
    this.ports.abandon();
    await this.cluster.registry.leave(this.workerId).catch(() => undefined);
  }
}
