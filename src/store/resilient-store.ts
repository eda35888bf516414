import type { FileHandle } from 'node:fs/promises';
import type { RunJobResult } from '../contract/run-job.js';
import type { JobStatus } from '../contract/service.js';
import { StoreUnavailableError, type RunStore, type StatusRecord } from './port.js';

/** How often a store that refused a write is tried again; also the Retry-After of a refused submission. */
export const STORE_RETRY_MS = 5_000;

export interface StoreAvailability {
  writable: boolean;
  /** What the last refused write met (ENOSPC, EDQUOT, EIO, EROFS), while the store is not writable. */
  error?: string;
  since?: string;
  /** Jobs whose status or result is held in memory until the store takes it. */
  heldJobs: number;
}

interface StoreLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** What a job's record should say on disk and does not yet: its latest status, and its result once it has one. */
interface Owed {
  record: StatusRecord;
  status: JobStatus;
  result?: RunJobResult;
}

/**
 * A run store seen through the times it cannot take writes (StoreUnavailableError: a full
 * disk, a quota, a failing device, a read-only remount). A new job is refused then (the caller
 * is still there to retry); a job already accepted is never lost: its status and result are
 * held in memory, read from there, and written when the store takes writes again; one not
 * started yet can wait for that (`whenWritable`). While it
 * does not, the store is tried every STORE_RETRY_MS (the writes it owes, else a probe), so it
 * recovers by itself. Held writes live as long as this process: a restart before they are
 * written finds the job as its last written status left it.
 */
export class ResilientRunStore implements RunStore {
  private readonly owed = new Map<string, Owed>();
  /** Each job's writes in order: a retried status never lands after a newer one. */
  private readonly chains = new Map<string, Promise<void>>();
  private unavailable: { error: string; since: string } | null = null;
  private readonly writableWaiters = new Set<() => void>();
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly inner: RunStore,
    private readonly log: StoreLog,
  ) {}

  open(): Promise<void> {
    return this.inner.open();
  }

  checkWritable(): Promise<void> {
    return this.observe(this.inner.checkWritable());
  }

  /** Not held: a submission the store cannot take is refused, so no one believes it accepted. */
  create(jobId: string, request: unknown, traceId: string | undefined, apiKey?: string): Promise<StatusRecord> {
    return this.observe(this.inner.create(jobId, request, traceId, apiKey));
  }

  setStatus(record: StatusRecord, status: JobStatus): Promise<StatusRecord> {
    return this.write({ record, status });
  }

  finish(record: StatusRecord, result: RunJobResult): Promise<StatusRecord> {
    return this.write({ record, status: result.status, result });
  }

  runDir(jobId: string): string {
    return this.inner.runDir(jobId);
  }

  readRequest(jobId: string): Promise<unknown> {
    return this.inner.readRequest(jobId);
  }

  async readResult(jobId: string): Promise<RunJobResult | null> {
    return this.owed.get(jobId)?.result ?? this.inner.readResult(jobId);
  }

  load(): Promise<{ records: StatusRecord[]; unreadable: string[] }> {
    return this.inner.load();
  }

  openArtifact(jobId: string, path: string): Promise<FileHandle> {
    return this.inner.openArtifact(jobId, path);
  }

  remove(jobId: string): Promise<void> {
    return this.serially(jobId, () => {
      this.owed.delete(jobId);
      return this.inner.remove(jobId);
    });
  }

  availability(): StoreAvailability {
    return { writable: this.unavailable === null, ...(this.unavailable ?? {}), heldJobs: this.owed.size };
  }

  /** Resolves once the store takes writes (at once when it does), or when `signal` aborts. */
  whenWritable(signal: AbortSignal): Promise<void> {
    if (this.unavailable === null || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        this.writableWaiters.delete(wake);
        signal.removeEventListener('abort', wake);
        resolve();
      };
      this.writableWaiters.add(wake);
      signal.addEventListener('abort', wake, { once: true });
    });
  }

  /** Writes what is held, oldest first, until the store refuses one. */
  async flush(): Promise<void> {
    for (const [jobId, owed] of [...this.owed]) {
      const taken = await this.serially(jobId, async () => {
        // Written or removed meanwhile, by a newer write of its own.
        if (this.owed.get(jobId) !== owed) return true;
        try {
          await this.writeThrough(owed);
          this.owed.delete(jobId);
          return true;
        } catch (error) {
          if (error instanceof StoreUnavailableError) return false;
          // Not the store being full: its run dir is gone, or worse. Retrying cannot help.
          this.owed.delete(jobId);
          this.log.error({ job_id: jobId, err: error }, 'a held job record could not be written and is dropped');
          return true;
        }
      });
      if (!taken) return;
    }
  }

  /** No more retries; one last flush. Returns the jobs whose records are still held, lost with this process. */
  async close(): Promise<string[]> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    await this.flush();
    return [...this.owed.keys()];
  }

  /** The store's answer, or the record as it would be, held until the store takes it. */
  private write(owed: Owed): Promise<StatusRecord> {
    return this.serially(owed.record.job_id, async () => {
      try {
        const written = await this.writeThrough(owed);
        this.owed.delete(owed.record.job_id);
        return written;
      } catch (error) {
        if (!(error instanceof StoreUnavailableError)) throw error;
        this.owed.set(owed.record.job_id, owed);
        return { ...owed.record, status: owed.status, updated_at: new Date().toISOString() };
      }
    });
  }

  private writeThrough(owed: Owed): Promise<StatusRecord> {
    const written = owed.result ? this.inner.finish(owed.record, owed.result) : this.inner.setStatus(owed.record, owed.status);
    return this.observe(written);
  }

  /** Every write tells whether the store takes writes: the first refusal starts the retries, a success ends the outage. */
  private async observe<T>(write: Promise<T>): Promise<T> {
    try {
      const value = await write;
      if (this.unavailable) {
        this.log.info({ was: this.unavailable, held_jobs: this.owed.size }, 'the run store takes writes again');
        this.unavailable = null;
        for (const wake of [...this.writableWaiters]) wake();
      }
      return value;
    } catch (error) {
      if (error instanceof StoreUnavailableError) {
        if (!this.unavailable) {
          this.unavailable = { error: error.reason, since: new Date().toISOString() };
          this.log.warn({ error: error.reason }, 'the run store cannot take writes: submissions get 503 store.unavailable, finished jobs are held in memory');
        }
        this.scheduleRetry();
      }
      throw error;
    }
  }

  private scheduleRetry(): void {
    if (this.closed || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.retry();
    }, STORE_RETRY_MS).unref();
  }

  /** The writes owed are the probe when there are any; else a write of the store's own. */
  private async retry(): Promise<void> {
    if (this.owed.size > 0) await this.flush();
    else await this.checkWritable().catch(() => undefined);
    if (this.unavailable || this.owed.size > 0) this.scheduleRetry();
  }

  private serially<T>(jobId: string, operation: () => Promise<T>): Promise<T> {
    const result = (this.chains.get(jobId) ?? Promise.resolve()).then(operation);
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    this.chains.set(jobId, settled);
    void settled.then(() => this.chains.get(jobId) === settled && this.chains.delete(jobId));
    return result;
  }
}
