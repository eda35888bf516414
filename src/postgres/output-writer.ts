import type { OutputStream } from '../contract/job-events.js';
import type { OutputChunk } from '../jobs/output-feed.js';
import type { RunTable } from './run-table.js';

/** Output is stored this often while a job writes: one transaction per job per interval, not per read. */
const FLUSH_MS = 100;

interface Pending {
  attempt: number;
  bytes: Record<OutputStream, number>;
  chunks: OutputChunk[];
  timer: NodeJS.Timeout | null;
  writing: Promise<void>;
}

/**
 * A worker's output of the jobs it runs, into the run table in batches, for followers on any
 * front door. Best effort: output that cannot be stored now (an outage) is dropped, as the
 * result will hold it anyway; it never holds a job up.
 */
export class OutputWriter {
  private readonly jobs = new Map<string, Pending>();

  constructor(
    private readonly runs: RunTable,
    private readonly onError: (jobId: string, error: Error) => void,
  ) {}

  start(jobId: string, attempt: number): void {
    this.jobs.set(jobId, { attempt, bytes: { stdout: 0, stderr: 0 }, chunks: [], timer: null, writing: Promise.resolve() });
  }

  append(jobId: string, stream: OutputStream, text: string): void {
    const job = this.jobs.get(jobId);
    if (!job) return;
    job.chunks.push({ stream, offset: job.bytes[stream], text });
    job.bytes[stream] += Buffer.byteLength(text);
    job.timer ??= setTimeout(() => this.flush(jobId, job), FLUSH_MS);
  }

  /** Stores what is left, before the result (which deletes the job's output with it). */
  async end(jobId: string): Promise<void> {
    const job = this.jobs.get(jobId);
    if (!job) return;
    this.jobs.delete(jobId);
    this.flush(jobId, job);
    await job.writing;
  }

  private flush(jobId: string, job: Pending): void {
    if (job.timer) clearTimeout(job.timer);
    job.timer = null;
    const chunks = job.chunks.splice(0);
    if (chunks.length === 0) return;
    job.writing = job.writing.then(() => this.runs.appendOutput(jobId, job.attempt, chunks).catch((error: Error) => this.onError(jobId, error)));
  }
}
