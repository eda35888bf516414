import { randomUUID } from 'node:crypto';
import PgBoss from 'pg-boss';
import type { Database, Queryable } from './database.js';

const QUEUE = 'agent-runner-jobs';
/**
 * pg-boss's own retries are not how a job comes back (a dead worker's jobs are given back by
 * the registry, which counts attempts in the run table): the limit is only never to strand one.
 */
const RETRY_LIMIT = 1_000;

/**
 * The job queue on pg-boss: SKIP LOCKED fetches, so many workers on many machines each take a
 * different job; a job failed by anyone is fetchable again at once. Its jobs carry only our job
 * id: the request lives in the run table. pg-boss runs on our connection pool, so a job is sent
 * in the same transaction that stores its run.
 */
export class BossQueue {
  private readonly boss: PgBoss;

  constructor(
    db: Database,
    /** How long pg-boss lets a job stay active before failing it itself: a backstop for a lost worker the registry missed. */
    private readonly expireInSeconds: number,
  ) {
    this.boss = new PgBoss({
      db: { executeSql: (text, values) => db.query(text, values) },
      schedule: false,
      maintenanceIntervalSeconds: 30,
    });
    // Maintenance errors while the database is away: the next round tries again.
    this.boss.on('error', () => undefined);
  }

  async start(): Promise<void> {
    await this.boss.start();
    if (!(await this.boss.getQueue(QUEUE)))
      await this.boss.createQueue(QUEUE, { name: QUEUE, retryLimit: RETRY_LIMIT, retryDelay: 0 }).catch(async (error: Error) => {
        // Another process created it between the two calls.
        if (!(await this.boss.getQueue(QUEUE))) throw error;
      });
  }

  /** Sends in the caller's transaction; returns the queue's id of the job. */
  async send(client: Queryable, jobId: string): Promise<string> {
    const id = randomUUID();
    await this.boss.send(QUEUE, { job_id: jobId }, { id, retryLimit: RETRY_LIMIT, retryDelay: 0, expireInSeconds: this.expireInSeconds, db: executor(client) });
    return id;
  }

  /** The next job, active for the caller once its transaction commits; null when none waits. */
  async fetch(client: Queryable): Promise<{ queueJobId: string; jobId: string } | null> {
    const [job] = await this.boss.fetch<{ job_id: string }>(QUEUE, { batchSize: 1, db: executor(client) });
    return job ? { queueJobId: job.id, jobId: job.data.job_id } : null;
  }

  /** In the caller's transaction when given one. */
  async complete(queueJobId: string, client?: Queryable): Promise<void> {
    await this.boss.complete(QUEUE, queueJobId, client ? { db: executor(client) } : {});
  }

  /** Back to the queue, fetchable again at once; in the caller's transaction when given one. */
  async retry(queueJobId: string, client?: Queryable): Promise<void> {
    await this.boss.fail(QUEUE, queueJobId, client ? { db: executor(client) } : {});
  }

  async cancel(queueJobId: string): Promise<void> {
    await this.boss.cancel(QUEUE, queueJobId);
  }

  async stop(): Promise<void> {
    await this.boss.stop({ graceful: false, wait: true, close: false });
  }
}

/** pg-boss runs its statements through this, so they join the caller's transaction. */
function executor(client: Queryable): PgBoss.Db {
  return { executeSql: (text, values) => client.query(text, values) };
}
