import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BackendDescription } from '../contract/backend.js';
import { MAX_ATTEMPTS, type Cluster } from './cluster.js';
import { ClusterWorkerPorts, type ClusterLog } from './worker-ports.js';
import { HEARTBEAT_MS } from './worker-registry.js';

/** What runs the jobs a node leases: the in-process WorkerLoop, or a WorkerProcess beside a front door. */
export interface JobRunner {
  /** Resolves once every slot saw leasing stop and recorded what it ran. */
  stopped(): Promise<void>;
  cancelAll(): void;
}

/** How often a worker with no kind ready yet looks again before it joins. */
const FIRST_KIND_POLL_MS = 100;

/**
 * A worker's membership of the cluster: its id, its ports, its heartbeat, and how it leaves.
 * Shared by `agent-runner worker` and the job slots `serve --workers N` runs beside a front door.
 */
export class WorkerNode {
  readonly workerId = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  readonly ports: ClusterWorkerPorts;
  /** Ends the offer of kinds prepared after join. */
  private readonly leaving = new AbortController();

  constructor(
    private readonly cluster: Cluster,
    private readonly log: ClusterLog,
  ) {
    this.ports = new ClusterWorkerPorts(cluster, this.workerId, join(cluster.runtime.config.stateDir, 'runtime', 'cluster-runs', this.workerId), log);
  }

  /**
   * Registers with the kinds this worker can run now, once one is (admission refuses jobs for
   * kinds no live worker offers), then offers each kind still being prepared once it is ready, looking again
   * every heartbeat until none is: on a new machine it takes local_process jobs at once, and
   * microvm ones once the guest image is built.
   */
  async join(slots: number, describe: () => Promise<readonly BackendDescription[]>): Promise<void> {
    let backends = await describe();
    const ready = () => backends.filter((backend) => backend.available).map((backend) => backend.kind);
    const still = () => backends.filter((backend) => backend.state === 'preparing').map((backend) => backend.kind);
    // A worker offering nothing would take no job: it joins once its first kind is ready (a host probe, well under a second).
    while (ready().length === 0 && still().length > 0) {
      await sleep(FIRST_KIND_POLL_MS);
      backends = await describe();
    }
    await this.cluster.registry.join({ workerId: this.workerId, slots, kinds: ready() });
    this.log.info({ worker_id: this.workerId, slots, kinds: ready(), preparing: still() }, 'worker joined the cluster');
    const { signal } = this.leaving;
    void (async () => {
      while (still().length > 0 && !signal.aborted) {
        await sleep(HEARTBEAT_MS, undefined, { signal }).catch(() => undefined);
        const offered = ready().join();
        backends = await describe().catch(() => backends);
        if (signal.aborted || ready().join() === offered) continue;
        await this.cluster.registry.offer(this.workerId, ready());
        this.log.info({ worker_id: this.workerId, kinds: ready(), preparing: still() }, 'worker offers the kinds prepared since it joined');
      }
    })().catch((error: Error) => this.log.error({ err: error }, 'the kinds prepared since the worker joined could not be offered'));
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
    this.leaving.abort();
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
