import { contractError } from '../contract/errors.js';
import { unrunResult } from '../runner/run-job.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import { BossQueue } from './boss-queue.js';
import { Database } from './database.js';
import { Notifications } from './notifications.js';
import { RunTable } from './run-table.js';
import { HEARTBEAT_MS, WorkerRegistry, type GiveUp } from './worker-registry.js';

/** A job whose workers died this many times is not handed out again: it ends run.interrupted. */
export const MAX_ATTEMPTS = 3;
/** pg-boss's own expiry of an active job, beyond the longest a job may run: heartbeats come first. */
const EXPIRY_MARGIN_SECONDS = 300;

/**
 * One process's share of the distributed mode: the database, the run table, the queue, the
 * worker registry and the notifications, opened together (migrations first) and closed
 * together. Front doors and workers both hold one; every one of them also reaps dead workers'
 * jobs now and then, so that works as long as any process of the cluster lives.
 */
export class Cluster {
  readonly db: Database;
  readonly runs: RunTable;
  readonly queue: BossQueue;
  readonly registry: WorkerRegistry;
  readonly notifications: Notifications;
  private reaper: NodeJS.Timeout | undefined;

  constructor(
    url: string,
    readonly runtime: RunnerRuntime,
    options: { applicationName: string },
  ) {
    this.db = new Database(url, { applicationName: options.applicationName });
    this.runs = new RunTable(this.db);
    this.queue = new BossQueue(this.db, Math.ceil(runtime.config.runJob.ceilings.timeout_ms / 1000) + EXPIRY_MARGIN_SECONDS);
    this.registry = new WorkerRegistry(this.db, this.runs, this.queue);
    this.notifications = new Notifications(url);
  }

  async open(): Promise<void> {
    // Processes starting together would race to create the schemas (ours and pg-boss's): one at a time.
    await this.db.exclusively('start', async () => {
      await this.db.migrate();
      await this.queue.start();
    });
    await this.notifications.start();
    this.reaper = setInterval(() => void this.reap().catch(() => undefined), HEARTBEAT_MS);
    this.reaper.unref();
  }

  reap(): Promise<number> {
    return this.registry.reap(MAX_ATTEMPTS, this.giveUp);
  }

  /** A job given back that must not run again: canceled while its worker was dying, or out of attempts. */
  readonly giveUp: GiveUp = async (jobId, reason) => {
    const request = await this.runs.request(jobId);
    const result =
      reason === 'canceled'
        ? unrunResult(request, 'canceled', contractError('run.canceled', 'canceled; its worker died before it stopped the job'), this.runtime)
        : unrunResult(request, 'failed', contractError('run.interrupted', `the workers running this job died ${MAX_ATTEMPTS} times; it is not handed out again`), this.runtime);
    await this.runs.endUnclaimed(jobId, result);
  };

  async close(): Promise<void> {
    clearInterval(this.reaper);
    await this.notifications.close();
    await this.queue.stop().catch(() => undefined);
    await this.db.close();
  }
}
