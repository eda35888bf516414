import type { Readable } from 'node:stream';
import { contractError, type ContractError } from '../contract/errors.js';
import type { Artifact, RunJobResult, TerminalStatus } from '../contract/run-job.js';
import type { JobStatus } from '../contract/service.js';
import { QueueClosedError, QueueFullError, type JobQueue, type QueueStats } from '../queue/port.js';
import { admitRunJob, unrunResult } from '../runner/run-job.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import { DuplicateJobError, isTerminal, StoreUnavailableError, type RunStore, type StatusRecord } from '../store/port.js';
import { blankRedactedValues, hasRedactedValues, redactRequest } from '../store/redact.js';
import { ResilientRunStore, STORE_RETRY_MS, type StoreAvailability } from '../store/resilient-store.js';
import { expired, type RetentionPolicy } from '../util/retention.js';
import type { EventCursor, JobEvent } from '../contract/job-events.js';
import type { JobEvents } from './events.js';
import { cursorJobId, cursorOf, unknownCursor } from './job-cursor.js';
import { followJob } from './job-follow.js';
import { LocalOutputFeed } from './output-feed.js';
import { jobNotFound, listedArtifact, listedArtifacts, type JobDesk, type JobPage, type JobState } from './job-desk.js';
import { visibleTo } from '../util/tenant.js';
import { ServiceError, storeRefusal } from './service-error.js';
import type { WorkerPorts } from './worker-ports.js';

export interface FrontDoorOptions {
  retention: RetentionPolicy;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
}

const RETENTION_INTERVAL_MS = 60_000;
/** Recent results kept in memory, so the long poll that follows a job's end reads no file. */
const RECENT_RESULTS = 256;
const RECENT_RESULT_BYTES = 64 * 1024;

/**
 * The job system as callers see it: admit -> store (queued) -> queue; status, long-poll,
 * listing, artifacts and cancel. It never runs a job: workers lease them through
 * `workerPorts()`, in another process, so nothing here forks. The in-memory index mirrors the
 * store and is rebuilt from it on start, where interrupted and waiting jobs are settled. While
 * the store cannot take writes, submissions are refused (503 store.unavailable) and what
 * accepted jobs record is held until it can (store/resilient-store.ts).
 */
export class FrontDoor implements JobDesk {
  private readonly store: ResilientRunStore;
  private readonly index = new Map<string, StatusRecord>();
  /**
   * Requests of jobs not yet leased, whole: the store keeps env values redacted (store/redact.ts),
   * so this is how a job's real env reaches the worker that runs it, in memory only.
   */
  private readonly pending = new Map<string, unknown>();
  /** `running` writes in flight: a job's result is recorded after its running status, never before. */
  private readonly runningWrites = new Map<string, Promise<void>>();
  private readonly recentResults = new Map<string, RunJobResult>();
  private readonly output = new LocalOutputFeed();
  private retentionTimer: NodeJS.Timeout | undefined;
  /** Aborted by close(): a worker waiting for the store to take writes stops waiting. */
  private readonly closing = new AbortController();

  constructor(
    private readonly runtime: RunnerRuntime,
    private readonly ports: { queue: JobQueue; store: RunStore; events: JobEvents },
    private readonly options: FrontDoorOptions,
  ) {
    this.store = new ResilientRunStore(ports.store, options.log);
  }

  /**
   * Rebuilds the index. Jobs that were running when the last process died are marked failed
   * with run.interrupted (not re-run: a command may have had effects we cannot see). Jobs that
   * were queued are queued again, oldest first, but those whose env or secret values the store kept only
   * as digests: they cannot run as asked, and end failed with store.redacted (never run).
   */
  async start(): Promise<{ recovered: number; interrupted: number; unreadable: string[] }> {
    const { store } = this;
    const { queue } = this.ports;
    await store.open();
    const { records, unreadable } = await store.load();
    records.sort(byCreation);
    let interrupted = 0;
    const requeue: StatusRecord[] = [];
    for (const record of records) {
      this.index.set(record.job_id, record);
      if (record.status === 'running') {
        interrupted += 1;
        await this.interrupt(record.job_id, 'the service stopped while this job was running; it was not re-run');
      } else if (record.status === 'queued') {
        const request = await store.readRequest(record.job_id).catch(() => null);
        if (hasRedactedValues(request)) {
          const message =
            'the service restarted while this job was queued; its env and secret values are kept only as sha256 digests, so it cannot run as asked; it never ran: resubmit it';
          await this.record(record.job_id, await this.unrunResultOf(record.job_id, 'failed', contractError('store.redacted', message)));
        } else {
          requeue.push(record);
        }
      }
    }
    for (const record of requeue) await queue.enqueue(record.job_id, { admitted: true });
    if (unreadable.length > 0) this.options.log.warn({ unreadable }, 'run store entries without a readable status.json were skipped');
    await this.applyRetention();
    this.retentionTimer = setInterval(() => void this.applyRetention(), RETENTION_INTERVAL_MS).unref();
    return { recovered: requeue.length, interrupted, unreadable };
  }

  async submit(request: unknown, apiKey?: string): Promise<StatusRecord> {
    const { store } = this;
    const { queue } = this.ports;
    if (!queue.stats().accepting) throw new ServiceError(contractError('queue.closed', new QueueClosedError().message));
    // Every caller of the front door is remote (HTTP): a local_path workspace only under a workspace root.
    const admitted = await admitRunJob(request, this.runtime, 'remote');
    if ('error' in admitted) throw new ServiceError(admitted.error);
    const existing = this.index.get(admitted.jobId);
    if (existing) {
      // Another key's job is not described: its id is taken, nothing more is said of it.
      const described = visibleTo(apiKey, existing.api_key) ? { status: existing.status } : {};
      throw new ServiceError(contractError('job.duplicate', `a job with id ${admitted.jobId} already exists`), { job_id: existing.job_id, ...described });
    }
    const { depth, capacity } = queue.stats();
    if (depth >= capacity) throw new ServiceError(contractError('queue.full', new QueueFullError(capacity).message), { retry_after_seconds: 1 });
    const stored = { ...(request as Record<string, unknown>), job_id: admitted.jobId };
    let record: StatusRecord;
    try {
      record = await store.create(admitted.jobId, redactRequest(stored), admitted.traceId, apiKey);
    } catch (error) {
      if (error instanceof DuplicateJobError) throw new ServiceError(contractError('job.duplicate', error.message), { job_id: admitted.jobId });
      if (error instanceof StoreUnavailableError) throw storeRefusal(error, STORE_RETRY_MS / 1000);
      throw error;
    }
    this.index.set(record.job_id, record);
    this.pending.set(record.job_id, stored);
    await queue.enqueue(record.job_id, { admitted: true });
    this.ports.events.statusChanged(record.job_id, record.status);
    this.options.log.info({ job_id: record.job_id, trace_id: record.trace_id }, 'job queued');
    return record;
  }

  async get(jobId: string): Promise<JobState> {
    const record = this.require(jobId);
    if (!isTerminal(record.status)) return record;
    const result = this.recentResults.get(jobId) ?? (await this.store.readResult(jobId));
    return result ? { ...record, result } : record;
  }

  /** Resolves on the job's terminal event or after `waitMs`, whichever first: no disk polling. */
  async waitForTerminal(jobId: string, waitMs: number, signal?: AbortSignal): Promise<JobState> {
    const record = this.require(jobId);
    if (!isTerminal(record.status) && waitMs > 0) {
      const timeout = AbortSignal.timeout(waitMs);
      await this.ports.events.waitForTerminal(jobId, signal ? AbortSignal.any([timeout, signal]) : timeout);
    }
    return this.get(jobId);
  }

  async follow(jobId: string, from: EventCursor | null, signal: AbortSignal): Promise<AsyncGenerator<JobEvent>> {
    this.require(jobId);
    return followJob({ get: (id) => this.get(id), onStatus: (listener) => this.ports.events.onStatus(listener), output: this.output }, jobId, from, signal);
  }

  async cancel(jobId: string): Promise<StatusRecord> {
    const record = this.require(jobId);
    if (isTerminal(record.status)) return record;
    const terminal = this.ports.events.waitForTerminal(jobId, new AbortController().signal);
    const outcome = await this.ports.queue.cancel(jobId);
    if (outcome === 'dequeued') {
      const result = await this.unrunResultOf(jobId, 'canceled', contractError('run.canceled', 'canceled while queued; it never ran'));
      this.pending.delete(jobId);
      await this.record(jobId, result);
    } else if (outcome === 'leased') {
      this.ports.events.requestCancel(jobId);
      await terminal;
    }
    return this.require(jobId);
  }

  /**
   * Newest first; the cursor is the last job of the previous page. The page goes on after where
   * that job stands, whatever its status now (it may have left a `status` filter since).
   */
  async list(limit: number, cursor: string | undefined, status?: JobStatus, apiKey?: string): Promise<JobPage> {
    const visible = (record: StatusRecord | undefined) => record !== undefined && visibleTo(apiKey, record.api_key);
    const after = cursor === undefined ? undefined : this.index.get(cursorJobId(cursor));
    if (cursor !== undefined && !visible(after)) throw unknownCursor(cursor);
    const all = [...this.index.values()]
      .filter((record) => visible(record) && (status === undefined || record.status === status))
      .sort(byCreation)
      .reverse();
    const start = after === undefined ? 0 : all.findIndex((record) => byCreation(record, after) < 0);
    const jobs = start < 0 ? [] : all.slice(start, start + limit);
    const last = jobs.at(-1);
    return { jobs, next_cursor: last && start + limit < all.length ? cursorOf(last.job_id) : null };
  }

  async artifacts(jobId: string): Promise<Artifact[]> {
    return listedArtifacts(await this.get(jobId));
  }

  async openArtifact(jobId: string, path: string): Promise<{ artifact: Artifact; content: Readable }> {
    const artifact = listedArtifact(await this.artifacts(jobId), jobId, path);
    return { artifact, content: (await this.store.openArtifact(jobId, artifact.path)).createReadStream() };
  }

  health(): QueueStats {
    return this.ports.queue.stats();
  }

  storeHealth(): StoreAvailability {
    return this.store.availability();
  }

  /** The job system as a worker sees it: lease, read the request, record the run. */
  workerPorts(): WorkerPorts {
    const { store } = this;
    const { queue, events } = this.ports;
    return {
      queue: {
        // A job started while the store cannot take writes would lose its logs and artifacts
        // (and end run.io_failed): it stays queued until the store takes writes again.
        lease: async (signal) => {
          await store.whenWritable(signal ? AbortSignal.any([signal, this.closing.signal]) : this.closing.signal);
          return queue.lease(signal);
        },
        complete: (jobId) => queue.complete(jobId),
        fail: (jobId) => queue.fail(jobId),
      },
      events,
      runs: {
        claim: async (jobId) => {
          const request = this.pending.get(jobId) ?? (await store.readRequest(jobId));
          this.pending.delete(jobId);
          return { request, runDir: store.runDir(jobId) };
        },
        markRunning: (jobId) => {
          const record = this.index.get(jobId);
          if (!record || isTerminal(record.status)) return Promise.resolve();
          const written = store.setStatus(record, 'running').then((next) => {
            if (isTerminal(this.require(jobId).status)) return;
            this.index.set(jobId, next);
            events.statusChanged(jobId, next.status);
          });
          const settled = written.catch((error: Error) => this.options.log.error({ job_id: jobId, err: error }, 'the running status could not be recorded'));
          this.runningWrites.set(jobId, settled);
          void settled.finally(() => this.runningWrites.get(jobId) === settled && this.runningWrites.delete(jobId));
          return written;
        },
        appendOutput: (jobId, stream, text) => this.output.append(jobId, stream, text),
        finish: (jobId, result) => this.record(jobId, result),
      },
    };
  }

  /** A worker died with these jobs leased: each is failed as interrupted, its lease given back. */
  async workerLost(jobIds: readonly string[]): Promise<void> {
    for (const jobId of jobIds) {
      await this.interrupt(jobId, 'the worker running this job died; it was not re-run');
      await this.ports.queue.fail(jobId);
    }
  }

  /** Resolves once no job is leased to a worker. */
  idle(): Promise<void> {
    return this.ports.queue.idle();
  }

  /** Stops admitting; waiting jobs stay queued in the store for the next start. */
  async close(): Promise<void> {
    this.closing.abort();
    const left = await this.ports.queue.close();
    if (left.length > 0) this.options.log.info({ jobs: left }, 'left queued in the store for the next start');
    clearInterval(this.retentionTimer);
  }

  /** After the last job is recorded: one more try at the records the store still owes. */
  async flushStore(): Promise<void> {
    const lost = await this.store.close();
    if (lost.length > 0) this.options.log.error({ jobs: lost }, 'the run store still cannot take these records; they are lost with this process');
  }

  private async interrupt(jobId: string, message: string): Promise<void> {
    await this.record(jobId, await this.unrunResultOf(jobId, 'failed', contractError('run.interrupted', message)));
  }

  /**
   * The whole result of a job that did not run to its end, from its request: the one in memory,
   * or the stored one, whose env and secret values are digests; its replay hash then stays empty (the
   * values it covers are not kept).
   */
  private async unrunResultOf(jobId: string, status: TerminalStatus, error: ContractError): Promise<RunJobResult> {
    const held = this.pending.get(jobId);
    if (held !== undefined) return unrunResult(held, status, error, this.runtime);
    const stored = await this.store.readRequest(jobId).catch(() => ({ job_id: jobId }));
    const result = unrunResult(blankRedactedValues(stored), status, error, this.runtime);
    if (hasRedactedValues(stored)) result.replay.request_sha256 = '';
    return result;
  }

  /** The job's one result: stored, indexed, announced; a store failure still ends the job. */
  private async record(jobId: string, result: RunJobResult): Promise<void> {
    await this.runningWrites.get(jobId);
    const record = this.require(jobId);
    try {
      this.index.set(jobId, await this.store.finish(record, result));
      this.remember(jobId, result);
    } catch (error) {
      // The run store failed otherwise than by being full (that is held): failed in memory, the service goes on.
      this.options.log.error({ job_id: jobId, err: error }, 'job could not be recorded');
      this.index.set(jobId, { ...record, status: 'failed' as JobStatus, updated_at: new Date().toISOString() });
    }
    this.output.drop(jobId);
    this.ports.events.statusChanged(jobId, this.require(jobId).status);
    const { maxCount } = this.options.retention;
    if (maxCount !== null && this.index.size > maxCount) await this.applyRetention();
  }

  private remember(jobId: string, result: RunJobResult): void {
    if (JSON.stringify(result).length > RECENT_RESULT_BYTES) return;
    this.recentResults.set(jobId, result);
    if (this.recentResults.size > RECENT_RESULTS) this.recentResults.delete(this.recentResults.keys().next().value as string);
  }

  private require(jobId: string): StatusRecord {
    const record = this.index.get(jobId);
    if (!record) throw jobNotFound(jobId);
    return record;
  }

  /** Deletes terminal runs past the age limit, and the oldest beyond the count limit. */
  private async applyRetention(): Promise<void> {
    const runs = [...this.index.values()].map((record) => ({
      id: record.job_id,
      bornAt: Date.parse(record.created_at),
      endedAt: isTerminal(record.status) ? Date.parse(record.updated_at) : null,
    }));
    for (const { entry } of expired(runs, this.options.retention)) {
      this.index.delete(entry.id);
      this.recentResults.delete(entry.id);
      // A run dir that cannot be deleted now (a failing device) is found again on the next start.
      await this.store.remove(entry.id).catch((error: Error) => this.options.log.error({ job_id: entry.id, err: error }, 'a run past retention could not be deleted'));
    }
  }
}

function byCreation(a: StatusRecord, b: StatusRecord): number {
  return a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.job_id < b.job_id ? -1 : a.job_id > b.job_id ? 1 : 0;
}
