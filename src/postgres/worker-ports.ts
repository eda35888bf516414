import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { OutputStream } from '../contract/job-events.js';
import type { RunJobResult } from '../contract/run-job.js';
import type { Lease } from '../queue/port.js';
import type { WorkerPorts } from '../jobs/worker-ports.js';
import { StoreUnavailableError } from '../store/port.js';
import { MAX_ATTEMPTS, type Cluster } from './cluster.js';
import { CHANNELS } from './notifications.js';
import { OutputWriter } from './output-writer.js';
import type { Artifact } from './run-table.js';

/** An idle worker looks for work this often even without a notification (one may be missed). */
const POLL_MS = 1_000;
const RETRY_MS = 1_000;

interface Held {
  queueJobId: string;
  attempt: number;
  request: unknown;
  runDir: string;
  /** Its result was refused: another attempt owns the job, so its queue entry is not ours to complete. */
  superseded?: boolean;
}

export interface ClusterLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * What a worker needs of the job system, on PostgreSQL: leases from pg-boss, each turned into
 * an attempt in the run table (fenced: only the current attempt's result is stored), artifacts
 * stored in the database with the result, cancels heard over LISTEN. The worker's run dirs are
 * local and go once their result is stored. A write the database cannot take now is tried
 * again until it can: a finished job's result is not dropped for an outage.
 */
export class ClusterWorkerPorts implements WorkerPorts {
  private readonly held = new Map<string, Held>();
  private readonly cancelListeners: Array<(jobId: string) => void> = [];
  private readonly stopping = new AbortController();
  /** Set once the worker gives up its writes (it exits): an outage then ends them. */
  private abandoned = false;
  private readonly output: OutputWriter;

  constructor(
    private readonly cluster: Cluster,
    readonly workerId: string,
    private readonly runsDir: string,
    private readonly log: ClusterLog,
  ) {
    this.output = new OutputWriter(cluster.runs, (jobId, error) => log.warn({ job_id: jobId, err: error }, 'live output could not be stored; the result will hold it'));
    cluster.notifications.on(CHANNELS.cancel, (payload) => {
      const jobId = String(payload.job_id);
      if (this.held.has(jobId)) this.cancel(jobId);
    });
    // Cancels sent while we were not listening.
    cluster.notifications.onReconnected(() => void this.recheckCancels());
  }

  /** Jobs this worker holds now. */
  heldJobs(): string[] {
    return [...this.held.keys()];
  }

  /** Leasing stops: waiting lease() calls resolve null. */
  stop(): void {
    this.stopping.abort();
  }

  /** Writes still waiting for the database stop trying (the process is about to exit). */
  abandon(): void {
    this.stop();
    this.abandoned = true;
  }

  readonly queue = {
    lease: async (signal?: AbortSignal): Promise<Lease | null> => {
      const stop = signal ? AbortSignal.any([signal, this.stopping.signal]) : this.stopping.signal;
      while (!stop.aborted) {
        try {
          const lease = await this.takeNext();
          if (lease) return lease;
        } catch (error) {
          if (!(error instanceof StoreUnavailableError)) this.log.error({ err: error }, 'could not fetch a job');
        }
        await this.nextChance(stop);
      }
      return null;
    },
    complete: async (jobId: string): Promise<void> => {
      const held = this.held.get(jobId);
      this.held.delete(jobId);
      if (held && !held.superseded) await this.persist(() => this.cluster.queue.complete(held.queueJobId));
    },
    /** The job could not be run or recorded here: back to the queue for another attempt. */
    fail: async (jobId: string): Promise<void> => {
      if (!this.held.has(jobId)) return;
      this.held.delete(jobId);
      await this.persist(() => this.cluster.registry.giveBack(this.workerId, [jobId], MAX_ATTEMPTS, this.cluster.giveUp));
    },
  };

  readonly runs = {
    claim: async (jobId: string): Promise<{ request: unknown; runDir: string }> => {
      const held = this.require(jobId);
      return { request: held.request, runDir: held.runDir };
    },
    markRunning: async (jobId: string): Promise<void> => {
      const held = this.require(jobId);
      this.output.start(jobId, held.attempt);
      // A cancel sent before the job's slot was listening is seen here, where the slot surely is.
      if (await this.cluster.runs.markRunning(jobId, held.attempt, this.workerId)) this.cancel(jobId);
    },
    appendOutput: (jobId: string, stream: OutputStream, text: string): void => this.output.append(jobId, stream, text),
    finish: async (jobId: string, result: RunJobResult): Promise<void> => {
      const held = this.require(jobId);
      await this.output.end(jobId);
      const artifacts = await this.readArtifacts(jobId, held.runDir, result);
      const stored = await this.persist(() => this.cluster.runs.finish(jobId, held.attempt, this.workerId, result, artifacts));
      await rm(held.runDir, { recursive: true, force: true });
      if (!stored) {
        held.superseded = true;
        this.log.warn({ job_id: jobId, attempt: held.attempt }, 'a late result was discarded: this worker was presumed dead and the job was handed to another');
      }
    },
  };

  readonly events = {
    onCancel: (listener: (jobId: string) => void): void => {
      this.cancelListeners.push(listener);
    },
  };

  /**
   * Fetches and claims in one transaction: a worker that dies between the two leaves the job
   * waiting in the queue, not active in pg-boss with no worker the registry could find.
   */
  private async takeNext(): Promise<Lease | null> {
    const { db, queue, runs } = this.cluster;
    for (;;) {
      const taken = await db.transaction(async (client) => {
        const next = await queue.fetch(client);
        if (!next) return null;
        const claim = await runs.claim(client, next.jobId, this.workerId);
        // Ended while it waited (canceled): nothing to run.
        if (!claim) await queue.complete(next.queueJobId, client);
        return { next, claim };
      });
      if (!taken) return null;
      const { next, claim } = taken;
      if (!claim) continue;
      this.held.set(next.jobId, { queueJobId: next.queueJobId, attempt: claim.attempt, request: claim.request, runDir: join(this.runsDir, next.jobId) });
      return { jobId: next.jobId };
    }
  }

  /** Until a job is queued (its notification), the poll interval passes, or leasing stops. */
  private async nextChance(stop: AbortSignal): Promise<void> {
    const waited = new AbortController();
    const off = this.cluster.notifications.on(CHANNELS.enqueued, () => waited.abort());
    try {
      await sleep(POLL_MS, undefined, { signal: AbortSignal.any([stop, waited.signal]) }).catch(() => undefined);
    } finally {
      off();
    }
  }

  /** The artifacts the result lists, read from the run dir, to be stored with it (rewritten to where they are served). */
  private async readArtifacts(jobId: string, runDir: string, result: RunJobResult): Promise<Artifact[]> {
    const artifacts: Artifact[] = [];
    for (const artifact of result.artifacts) {
      artifacts.push({ path: artifact.path, content: await readFile(join(runDir, 'artifacts', ...artifact.path.split('/'))) });
      artifact.uri = `/v1/jobs/${encodeURIComponent(jobId)}/artifacts/${artifact.path.split('/').map(encodeURIComponent).join('/')}`;
    }
    return artifacts;
  }

  private cancel(jobId: string): void {
    for (const listener of this.cancelListeners) listener(jobId);
  }

  private async recheckCancels(): Promise<void> {
    for (const jobId of this.held.keys()) {
      if (await this.cluster.runs.cancelRequested(jobId).catch(() => false)) this.cancel(jobId);
    }
  }

  /** Tries a write until the database takes it (or the worker abandons it: then the last error stands). */
  private async persist<T>(write: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await write();
      } catch (error) {
        if (!(error instanceof StoreUnavailableError) || this.abandoned) throw error;
        await sleep(RETRY_MS);
      }
    }
  }

  private require(jobId: string): Held {
    const held = this.held.get(jobId);
    if (!held) throw new Error(`job ${jobId} is not held by this worker`);
    return held;
  }
}
