import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { contractError } from '../contract/errors.js';
import type { EventCursor, JobEvent } from '../contract/job-events.js';
import type { Artifact } from '../contract/run-job.js';
import type { JobStatus } from '../contract/service.js';
import { QueueClosedError, QueueFullError, type QueueStats } from '../queue/port.js';
import { admitRunJob, unrunResult } from '../runner/run-job.js';
import { cursorJobId, cursorOf, unknownCursor } from '../jobs/job-cursor.js';
import { followJob } from '../jobs/job-follow.js';
import type { OutputFeed } from '../jobs/output-feed.js';
import { artifactNotFound, jobNotFound, listedArtifact, listedArtifacts, type JobDesk, type JobPage, type JobState } from '../jobs/job-desk.js';
import { ServiceError, storeRefusal } from '../jobs/service-error.js';
import { DuplicateJobError, isTerminal, StoreUnavailableError, type StatusRecord } from '../store/port.js';
import { redactRequest } from '../store/redact.js';
import type { StoreAvailability } from '../store/resilient-store.js';
import type { RetentionPolicy } from '../util/retention.js';
import type { Cluster } from './cluster.js';
import { CHANNELS } from './notifications.js';

export interface ClusterFrontDoorOptions {
  /** Jobs that may wait (all front doors together) before submissions get 503 queue.full. */
  queueCapacity: number;
  retention: RetentionPolicy;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
}

const STATS_INTERVAL_MS = 1_000;
const RETENTION_INTERVAL_MS = 60_000;
/** A waiter looks at the table this often too: a notification sent while its connection was down is lost. */
const RECHECK_MS = 2_000;
/** How long a cancel waits for the worker to report the job stopped before answering with its status then. */
const CANCEL_WAIT_MS = 30_000;
const RETRY_AFTER_SECONDS = 1;

/**
 * A front door of the distributed mode: it admits jobs into PostgreSQL (the run and its queue
 * entry in one transaction, so an accepted job is never lost, whatever happens to this
 * process after it answered) and answers status, long polls, listings, artifacts and cancels
 * for any job, whichever front door took it. It keeps nothing of its own: any number of them
 * can serve one database. While the database cannot be reached, every route that needs it
 * answers 503 store.unavailable, and it recovers by itself when the database returns.
 */
export class ClusterFrontDoor implements JobDesk {
  private stats: QueueStats;
  private availability: StoreAvailability = { writable: true, heldJobs: 0 };
  private timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly cluster: Cluster,
    private readonly options: ClusterFrontDoorOptions,
  ) {
    this.stats = { depth: 0, capacity: options.queueCapacity, running: 0, accepting: true };
  }

  async start(): Promise<void> {
    await this.refreshStats();
    const every = (ms: number, work: () => Promise<unknown>) => {
      const timer = setInterval(() => void work().catch(() => undefined), ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(STATS_INTERVAL_MS, () => this.refreshStats());
    every(RETENTION_INTERVAL_MS, () => this.applyRetention());
    await this.applyRetention().catch(() => undefined);
  }

  async submit(request: unknown, apiKey?: string): Promise<StatusRecord> {
    const { cluster } = this;
    if (!this.stats.accepting) throw new ServiceError(contractError('queue.closed', new QueueClosedError().message));
    const admitted = await admitRunJob(request, cluster.runtime, 'remote');
    if ('error' in admitted) throw new ServiceError(admitted.error);
    const offered = await this.reading(() => cluster.registry.kindsOnOffer());
    if (!offered.has(admitted.backendKind)) {
      const kinds = offered.size > 0 ? `live workers offer: ${[...offered].sort().join(', ')}` : 'no worker is alive';
      throw new ServiceError(contractError('backend.unavailable', `no live worker offers the ${admitted.backendKind} backend (${kinds}); the job was not accepted`), {
        http_status: 503,
        retry_after_seconds: RETRY_AFTER_SECONDS,
      });
    }
    const { queued } = await this.reading(() => cluster.runs.counts());
    if (queued >= this.options.queueCapacity) {
      throw new ServiceError(contractError('queue.full', new QueueFullError(this.options.queueCapacity).message), { retry_after_seconds: RETRY_AFTER_SECONDS });
    }
    const payload = { ...(request as Record<string, unknown>), job_id: admitted.jobId };
    try {
      const record = await cluster.db.transaction(async (client) => {
        const queueJobId = await cluster.queue.send(client, admitted.jobId);
        return cluster.runs.insert(client, {
          jobId: admitted.jobId,
          traceId: admitted.traceId,
          apiKey,
          backend: admitted.backendKind,
          request: redactRequest(payload),
          payload,
          queueJobId,
        });
      });
      this.markReachable();
      this.options.log.info({ job_id: record.job_id, trace_id: record.trace_id }, 'job queued');
      return record;
    } catch (error) {
      if (error instanceof DuplicateJobError) throw new ServiceError(contractError('job.duplicate', error.message), { job_id: admitted.jobId });
      if (error instanceof StoreUnavailableError) {
        this.markUnreachable(error);
        throw storeRefusal(error, RETRY_AFTER_SECONDS);
      }
      throw error;
    }
  }

  async get(jobId: string): Promise<JobState> {
    const state = await this.reading(() => this.cluster.runs.get(jobId));
    if (!state) throw jobNotFound(jobId);
    return state;
  }

  /** On the job's terminal notification, a recheck of the table, or `waitMs`: whichever first. */
  async waitForTerminal(jobId: string, waitMs: number, signal?: AbortSignal): Promise<JobState> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const ended = new AbortController();
      const off = this.cluster.notifications.on(CHANNELS.status, (payload) => {
        if (payload.job_id === jobId && isTerminal(payload.status as JobStatus)) ended.abort();
      });
      try {
        const state = await this.get(jobId);
        const left = deadline - Date.now();
        if (isTerminal(state.status) || left <= 0 || signal?.aborted) return state;
        await sleep(Math.min(left, RECHECK_MS), undefined, { signal: AbortSignal.any([ended.signal, ...(signal ? [signal] : [])]) }).catch(() => undefined);
      } finally {
        off();
      }
    }
  }

  async follow(jobId: string, from: EventCursor | null, signal: AbortSignal): Promise<AsyncGenerator<JobEvent>> {
    await this.get(jobId);
    const { notifications, runs } = this.cluster;
    const output: OutputFeed = {
      since: (id, cursor) => this.reading(() => runs.outputSince(id, cursor)),
      onAppend: (listener) => notifications.on(CHANNELS.output, (payload) => listener(String(payload.job_id))),
    };
    const onStatus = (listener: (jobId: string, status: JobStatus) => void) =>
      notifications.on(CHANNELS.status, (payload) => listener(String(payload.job_id), payload.status as JobStatus));
    return followJob({ get: (id) => this.get(id), onStatus, output }, jobId, from, signal);
  }

  async cancel(jobId: string): Promise<StatusRecord> {
    const { runs, queue, runtime } = this.cluster;
    const state = await this.get(jobId);
    if (isTerminal(state.status)) return state;
    const request = await this.reading(() => runs.request(jobId));
    const message = (state.attempt ?? 0) > 0 ? 'canceled while queued again after its worker died; it was not run again' : 'canceled while queued; it never ran';
    if (await this.reading(() => runs.endUnclaimed(jobId, unrunResult(request, 'canceled', contractError('run.canceled', message), runtime)))) {
      const queueJobId = await runs.queueJobId(jobId).catch(() => null);
      // Best effort: a worker that fetches it anyway finds it ended and skips it.
      if (queueJobId) await queue.cancel(queueJobId).catch(() => undefined);
      return this.get(jobId);
    }
    // A worker holds it: it hears the cancel (LISTEN) and stops the job's whole tree.
    await this.reading(() => runs.requestCancel(jobId));
    return this.waitForTerminal(jobId, CANCEL_WAIT_MS);
  }

  async list(limit: number, cursor: string | undefined, status?: JobStatus, apiKey?: string): Promise<JobPage> {
    const after = cursor === undefined ? undefined : cursorJobId(cursor);
    const page = await this.reading(() => this.cluster.runs.list(limit, after, status, apiKey));
    if (page === null) throw unknownCursor(cursor!);
    const last = page.jobs.at(-1);
    return { jobs: page.jobs, next_cursor: last && page.more ? cursorOf(last.job_id) : null };
  }

  async artifacts(jobId: string): Promise<Artifact[]> {
    return listedArtifacts(await this.get(jobId));
  }

  async openArtifact(jobId: string, path: string): Promise<{ artifact: Artifact; content: Readable }> {
    const artifact = listedArtifact(await this.artifacts(jobId), jobId, path);
    const content = await this.reading(() => this.cluster.runs.artifact(jobId, artifact.path));
    if (!content) throw artifactNotFound(jobId, path);
    return { artifact, content: Readable.from([content]) };
  }

  /** Refreshed every second in the background: /health answers at once, database or not. */
  health(): QueueStats {
    return this.stats;
  }

  storeHealth(): StoreAvailability {
    return this.availability;
  }

  /** Stops admitting; what is queued stays queued in the database, for any worker. */
  close(): void {
    this.stats = { ...this.stats, accepting: false };
    for (const timer of this.timers) clearInterval(timer);
  }

  private async refreshStats(): Promise<void> {
    const { queued, running } = await this.reading(() => this.cluster.runs.counts()).catch(() => ({ queued: this.stats.depth, running: this.stats.running }));
    this.stats = { ...this.stats, depth: queued, running };
  }

  private async applyRetention(): Promise<void> {
    const { maxAgeMs, maxCount } = this.options.retention;
    if (maxAgeMs === null && maxCount === null) return;
    const deleted = await this.cluster.runs.applyRetention(maxAgeMs, maxCount);
    if (deleted > 0) this.options.log.info({ deleted }, 'runs past retention deleted');
  }

  /** A read or write the database must answer: while it cannot, 503 store.unavailable. */
  private async reading<T>(work: () => Promise<T>): Promise<T> {
    try {
      const value = await work();
      this.markReachable();
      return value;
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error;
      this.markUnreachable(error);
      throw new ServiceError(contractError('store.unavailable', `${error.message}; retry after Retry-After`, { reason: error.reason }), {
        retry_after_seconds: RETRY_AFTER_SECONDS,
      });
    }
  }

  private markReachable(): void {
    if (this.availability.writable) return;
    this.options.log.info({ was: this.availability }, 'the database is reachable again');
    this.availability = { writable: true, heldJobs: 0 };
  }

  private markUnreachable(error: StoreUnavailableError): void {
    if (!this.availability.writable) return;
    this.options.log.warn({ error: error.reason }, 'the database cannot be reached: routes that need it answer 503 store.unavailable until it returns');
    this.availability = { writable: false, error: error.reason, since: new Date().toISOString(), heldJobs: 0 };
  }
}
