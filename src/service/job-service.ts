import { EventEmitter, once } from 'node:events';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { contractError, type ContractError, type ErrorCode } from '../contract/errors.js';
import type { Artifact, RunJobResult } from '../contract/run-job.js';
import { JobQueue, QueueClosedError, QueueFullError } from '../queue/job-queue.js';
import { admitRunJob, runJob, unrunResult } from '../runner/run-job.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import { JobStaging } from '../runner/staging.js';
import { DuplicateJobError, isTerminal, type RunStore, type StatusRecord } from '../store/run-store.js';

/** A failure the front door reports with a stable code (and its HTTP status from the table). */
export class ServiceError extends Error {
  constructor(
    readonly error: ContractError,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(error.message);
  }

  get code(): ErrorCode {
    return this.error.code;
  }
}

export interface ServiceOptions {
  capacity: number;
  concurrency: number;
  retention: { maxAgeMs: number | null; maxCount: number | null };
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
}

export interface JobState extends StatusRecord {
  result?: RunJobResult;
}

const RETENTION_INTERVAL_MS = 60_000;

/**
 * The job lifecycle behind the HTTP face: admit -> store (queued) -> queue -> run -> store
 * (result, then terminal status) -> notify. The in-memory index mirrors the store and is
 * rebuilt from it on start, where interrupted and waiting jobs are settled.
 */
export class JobService {
  private readonly index = new Map<string, StatusRecord>();
  private readonly events = new EventEmitter().setMaxListeners(0);
  private readonly queue: JobQueue;
  /** Requests of jobs not yet started, so a worker need not read them back from disk. */
  private readonly pending = new Map<string, unknown>();
  /** Results being written after their worker slot was freed; drain waits for them. */
  private readonly recording = new Set<Promise<void>>();
  private retentionTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly runtime: RunnerRuntime,
    private readonly store: RunStore,
    private readonly options: ServiceOptions,
  ) {
    this.queue = new JobQueue(options.capacity, options.concurrency, (jobId, signal) => this.execute(jobId, signal));
  }

  /**
   * Rebuilds the index. Jobs that were running when the last process died are marked failed
   * with run.interrupted (not re-run: a command may have had effects we cannot see). Jobs that
   * were queued run now, oldest first.
   */
  async start(): Promise<{ recovered: number; interrupted: number; unreadable: string[] }> {
    await this.store.open();
    const orphans = await JobStaging.reapOrphans(this.runtime.stagingDir);
    if (orphans > 0) this.options.log.info({ orphans }, 'removed work dirs left by a previous process');
    const { records, unreadable } = await this.store.load();
    records.sort(byCreation);
    let interrupted = 0;
    const requeue: StatusRecord[] = [];
    for (const record of records) {
      this.index.set(record.job_id, record);
      if (record.status === 'running') {
        interrupted += 1;
        const request = await this.store.readRequest(record.job_id).catch(() => ({ job_id: record.job_id }));
        const result = unrunResult(request, 'failed', contractError('run.interrupted', 'the service stopped while this job was running; it was not re-run'), this.runtime);
        this.index.set(record.job_id, await this.store.finish(record, result));
      } else if (record.status === 'queued') {
        requeue.push(record);
      }
    }
    for (const record of requeue) {
      this.pending.set(record.job_id, await this.store.readRequest(record.job_id));
      this.queue.push(record.job_id, true);
    }
    if (unreadable.length > 0) this.options.log.warn({ unreadable }, 'run store entries without a readable status.json were skipped');
    await this.applyRetention();
    this.retentionTimer = setInterval(() => void this.applyRetention(), RETENTION_INTERVAL_MS).unref();
    return { recovered: requeue.length, interrupted, unreadable };
  }

  async submit(request: unknown): Promise<StatusRecord> {
    if (!this.queue.isAccepting) throw new ServiceError(contractError('queue.closed', new QueueClosedError().message));
    const admitted = admitRunJob(request, this.runtime);
    if ('error' in admitted) throw new ServiceError(admitted.error);
    const existing = this.index.get(admitted.jobId);
    if (existing) throw new ServiceError(contractError('job.duplicate', `a job with id ${admitted.jobId} already exists`), { job_id: existing.job_id, status: existing.status });
    if (this.queue.depth >= this.queue.capacity) {
      throw new ServiceError(contractError('queue.full', new QueueFullError(this.queue.capacity).message), { retry_after_seconds: 1 });
    }
    const stored = { ...(request as Record<string, unknown>), job_id: admitted.jobId };
    let record: StatusRecord;
    try {
      record = await this.store.create(admitted.jobId, stored, admitted.traceId);
    } catch (error) {
      if (error instanceof DuplicateJobError) throw new ServiceError(contractError('job.duplicate', error.message), { job_id: admitted.jobId });
      throw error;
    }
    this.index.set(record.job_id, record);
    this.pending.set(record.job_id, stored);
    this.queue.push(record.job_id, true);
    this.options.log.info({ job_id: record.job_id, trace_id: record.trace_id }, 'job queued');
    return record;
  }

  async get(jobId: string): Promise<JobState> {
    const record = this.require(jobId);
    if (!isTerminal(record.status)) return record;
    const result = await this.store.readResult(jobId);
    return result ? { ...record, result } : record;
  }

  /** Resolves on the job's terminal event or after `waitMs`, whichever first: no disk polling. */
  async waitForTerminal(jobId: string, waitMs: number, signal?: AbortSignal): Promise<JobState> {
    const record = this.require(jobId);
    if (!isTerminal(record.status) && waitMs > 0) {
      const timeout = AbortSignal.timeout(waitMs);
      const stop = signal ? AbortSignal.any([timeout, signal]) : timeout;
      await once(this.events, `terminal:${jobId}`, { signal: stop }).catch(() => undefined);
    }
    return this.get(jobId);
  }

  async cancel(jobId: string): Promise<StatusRecord> {
    const record = this.require(jobId);
    if (isTerminal(record.status)) return record;
    const outcome = this.queue.cancel(jobId);
    if (outcome === 'dequeued') {
      const request = this.pending.get(jobId) ?? (await this.store.readRequest(jobId));
      this.pending.delete(jobId);
      await this.complete(record, unrunResult(request, 'canceled', contractError('run.canceled', 'canceled while queued; it never ran'), this.runtime));
    } else if (outcome === 'aborted') {
      await once(this.events, `terminal:${jobId}`);
    }
    return this.require(jobId);
  }

  /** Newest first; the cursor is the last job of the previous page. */
  list(limit: number, cursor: string | undefined): { jobs: StatusRecord[]; next_cursor: string | null } {
    const all = [...this.index.values()].sort(byCreation).reverse();
    let start = 0;
    if (cursor) {
      const decoded = Buffer.from(cursor, 'base64url').toString('utf8');
      const position = all.findIndex((record) => record.job_id === decoded);
      start = position < 0 ? all.length : position + 1;
    }
    const jobs = all.slice(start, start + limit);
    const last = jobs.at(-1);
    return { jobs, next_cursor: last && start + limit < all.length ? Buffer.from(last.job_id).toString('base64url') : null };
  }

  async artifacts(jobId: string): Promise<Artifact[]> {
    const state = await this.get(jobId);
    if (!state.result) throw new ServiceError(contractError('job.not_terminal', `job ${jobId} is ${state.status}; artifacts exist once it is terminal`), { status: state.status });
    return state.result.artifacts;
  }

  /** Opens a stored artifact by the path its result lists; any other path is not found. */
  async openArtifact(jobId: string, path: string) {
    const artifact = (await this.artifacts(jobId)).find((candidate) => candidate.path === path);
    if (!artifact) throw new ServiceError(contractError('job.not_found', `job ${jobId} has no artifact ${JSON.stringify(path)}`));
    const file = join(this.store.runDir(jobId), 'artifacts', ...artifact.path.split('/'));
    return { artifact, handle: await open(file, constants.O_RDONLY | constants.O_NOFOLLOW) };
  }

  health() {
    return { depth: this.queue.depth, capacity: this.queue.capacity, running: this.queue.runningCount, concurrency: this.queue.concurrency, accepting: this.queue.isAccepting };
  }

  /** SIGTERM: stop accepting, let running jobs finish within the grace period, cancel the rest. */
  async drain(graceMs: number): Promise<void> {
    const left = this.queue.close();
    if (left.length > 0) this.options.log.info({ jobs: left }, 'left queued in the store for the next start');
    await this.queue.drain(graceMs);
    await Promise.all(this.recording);
    clearInterval(this.retentionTimer);
  }

  private require(jobId: string): StatusRecord {
    const record = this.index.get(jobId);
    if (!record) throw new ServiceError(contractError('job.not_found', `no job with id ${jobId}`));
    return record;
  }

  /**
   * A worker slot covers the run itself; writing the result happens after the slot is freed,
   * so the next job does not wait on our fsyncs.
   */
  private async execute(jobId: string, signal: AbortSignal): Promise<void> {
    const record = this.require(jobId);
    const log = { job_id: jobId, trace_id: record.trace_id };
    let running: Promise<void> = Promise.resolve();
    let result: RunJobResult;
    try {
      const request = this.pending.get(jobId) ?? (await this.store.readRequest(jobId));
      this.pending.delete(jobId);
      result = await runJob(request, {
        runtime: this.runtime,
        signal,
        runDir: this.store.runDir(jobId),
        onRunning: () => {
          running = this.store.setStatus(record, 'running').then((next) => void this.index.set(jobId, next));
        },
      });
    } catch (error) {
      result = unrunResult({ job_id: jobId }, 'failed', contractError('run.io_failed', `the job could not be read or run: ${(error as Error).message}`), this.runtime);
    }
    const recorded = running
      .then(() => this.complete(this.require(jobId), result))
      .then(
        () => this.options.log.info({ ...log, status: result.status, error_code: result.error?.code, duration_ms: result.duration_ms }, 'job finished'),
        (error: Error) => {
          // The run store itself failed (disk full, ...): the job is failed in memory, the service goes on.
          this.options.log.error({ ...log, err: error }, 'job could not be recorded');
          this.index.set(jobId, { ...this.require(jobId), status: 'failed', updated_at: new Date().toISOString() });
          this.events.emit(`terminal:${jobId}`);
        },
      )
      .finally(() => this.recording.delete(recorded));
    this.recording.add(recorded);
  }

  private async complete(record: StatusRecord, result: RunJobResult): Promise<void> {
    const next = await this.store.finish(record, result);
    this.index.set(record.job_id, next);
    this.events.emit(`terminal:${record.job_id}`);
    if (this.options.retention.maxCount !== null && this.index.size > this.options.retention.maxCount) await this.applyRetention();
  }

  /** Deletes terminal runs past the age limit, then the oldest beyond the count limit. */
  private async applyRetention(): Promise<void> {
    const { maxAgeMs, maxCount } = this.options.retention;
    const terminal = [...this.index.values()].filter((record) => isTerminal(record.status)).sort(byCreation);
    const cutoff = maxAgeMs === null ? null : Date.now() - maxAgeMs;
    const overCount = maxCount === null ? 0 : Math.max(0, this.index.size - maxCount);
    const doomed = terminal.filter((record, position) => position < overCount || (cutoff !== null && Date.parse(record.updated_at) < cutoff));
    for (const record of doomed) {
      this.index.delete(record.job_id);
      await this.store.remove(record.job_id);
    }
  }
}

function byCreation(a: StatusRecord, b: StatusRecord): number {
  return a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.job_id < b.job_id ? -1 : a.job_id > b.job_id ? 1 : 0;
}
