import type { OutputStream } from '../contract/job-events.js';
import type { RunJobResult } from '../contract/run-job.js';
import type { LeaseSource } from '../queue/port.js';
import type { CancelSource } from './events.js';

/** What a worker reads and writes of the jobs it leased, by id. */
export interface WorkerRunStore {
  /** The leased job's request, and where its full logs and collected artifacts go. */
  claim(jobId: string): Promise<{ request: unknown; runDir: string }>;
  markRunning(jobId: string): Promise<void>;
  /** Output as the job writes it, for its followers; best effort (the result holds it all). */
  appendOutput(jobId: string, stream: OutputStream, text: string): void;
  /** Records the job's one result (and its terminal status). */
  finish(jobId: string, result: RunJobResult): Promise<void>;
}

/** Everything a worker needs, whether it runs beside the front door or in another process. */
export interface WorkerPorts {
  queue: LeaseSource;
  runs: WorkerRunStore;
  events: CancelSource;
}
