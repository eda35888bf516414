import { hostname } from 'node:os';
import { SCHEMA, type Database, type Queryable } from './database.js';
import type { BossQueue } from './boss-queue.js';
import type { RunTable } from './run-table.js';

/** How often a worker says it is alive, and how long without a word before it counts as dead. */
export const HEARTBEAT_MS = 1_000;
export const DEAD_AFTER_MS = 6_000;
const LIVE = `heartbeat_at > clock_timestamp() - make_interval(secs => ${DEAD_AFTER_MS / 1000})`;

export interface WorkerInfo {
  workerId: string;
  slots: number;
  /** The backend kinds it can run now. */
  kinds: string[];
}

export type GiveUpReason = 'canceled' | 'attempts';
/** What the registry does with a dead worker's job that must not run again. */
export type GiveUp = (jobId: string, reason: GiveUpReason) => Promise<void>;

/**
 * Who is alive, by heartbeat (database time, so clocks of machines need not agree). A worker
 * registers, beats every HEARTBEAT_MS, and leaves when it stops; one silent for DEAD_AFTER_MS
 * is dead, and whoever reaps next (any front door or worker) gives its jobs back to the queue.
 */
export class WorkerRegistry {
  private heartbeat: NodeJS.Timeout | undefined;
  private liveKinds: { at: number; kinds: Set<string> } | null = null;
  /** What this process's worker offers now (offer() adds the kinds prepared since it joined). */
  private kinds: string[] = [];

  constructor(
    private readonly db: Database,
    private readonly runs: RunTable,
    private readonly queue: BossQueue,
  ) {}

  /** Registers and keeps beating until leave(); a beat that finds its row gone (reaped) registers again. */
  async join(worker: WorkerInfo): Promise<void> {
    this.kinds = worker.kinds;
    const upsert = () =>
      this.db.query(
        `INSERT INTO ${SCHEMA}.workers (worker_id, host, pid, slots, kinds) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = clock_timestamp()`,
        [worker.workerId, hostname(), process.pid, worker.slots, JSON.stringify(this.kinds)],
      );
    await upsert();
    this.heartbeat = setInterval(() => void upsert().catch(() => undefined), HEARTBEAT_MS);
  }

  /** The kinds the worker runs now, in place of those it joined with (a kind prepared since). */
  async offer(workerId: string, kinds: string[]): Promise<void> {
    this.kinds = kinds;
    await this.db.query(`UPDATE ${SCHEMA}.workers SET kinds = $2 WHERE worker_id = $1`, [workerId, JSON.stringify(kinds)]);
  }

  async leave(workerId: string): Promise<void> {
    clearInterval(this.heartbeat);
    await this.db.query(`DELETE FROM ${SCHEMA}.workers WHERE worker_id = $1`, [workerId]);
  }

  /** Backend kinds some live worker offers, looked up at most once a second. */
  async kindsOnOffer(): Promise<Set<string>> {
    if (this.liveKinds && Date.now() - this.liveKinds.at < 1_000) return this.liveKinds.kinds;
    const { rows } = await this.db.query<{ kinds: string[] }>(`SELECT kinds FROM ${SCHEMA}.workers WHERE ${LIVE}`);
    const kinds = new Set(rows.flatMap((row) => row.kinds));
    this.liveKinds = { at: Date.now(), kinds };
    return kinds;
  }

  /**
   * Dead workers' jobs go back to the queue, and the dead are forgotten. One reaper at a time
   * (an advisory lock; the others skip). Returns how many jobs were given back.
   */
  async reap(maxAttempts: number, giveUp: GiveUp): Promise<number> {
    const returned = await this.db.transaction(async (client) => {
      const { rows: locked } = await client.query<{ locked: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtext('${SCHEMA}.reap')) AS locked`);
      if (!locked[0]?.locked) return [];
      const { rows: dead } = await client.query<{ worker_id: string }>(`DELETE FROM ${SCHEMA}.workers WHERE NOT (${LIVE}) RETURNING worker_id`);
      if (dead.length === 0) return [];
      return this.requeue(
        client,
        dead.map((row) => row.worker_id),
        undefined,
        maxAttempts,
      );
    });
    await this.settle(returned, giveUp);
    return returned.length;
  }

  /** A worker of this process died with these jobs: back to the queue now, without waiting to be reaped. */
  async giveBack(workerId: string, jobIds: readonly string[], maxAttempts: number, giveUp: GiveUp): Promise<void> {
    const returned = await this.db.transaction((client) => this.requeue(client, [workerId], jobIds, maxAttempts));
    await this.settle(returned, giveUp);
  }

  /**
   * In one transaction: the jobs leave their worker, and those that may run again are
   * fetchable at once. The others (canceled meanwhile, or out of attempts) are returned with
   * the reason, to be ended.
   */
  private async requeue(
    client: Queryable,
    workerIds: readonly string[],
    jobIds: readonly string[] | undefined,
    maxAttempts: number,
  ): Promise<Array<{ jobId: string; queueJobId: string; reason: GiveUpReason | null }>> {
    const returned = await this.runs.giveBack(client, workerIds, jobIds);
    const settled = returned.map((job) => ({ ...job, reason: job.cancelRequested ? ('canceled' as const) : job.attempt >= maxAttempts ? ('attempts' as const) : null }));
    for (const job of settled) if (job.reason === null) await this.queue.retry(job.queueJobId, client);
    return settled;
  }

  private async settle(returned: Array<{ jobId: string; queueJobId: string; reason: GiveUpReason | null }>, giveUp: GiveUp): Promise<void> {
    for (const job of returned) {
      if (job.reason === null) continue;
      await giveUp(job.jobId, job.reason);
      await this.queue.complete(job.queueJobId).catch(() => undefined);
    }
  }
}
