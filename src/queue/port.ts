/**
 * The queue port: what the front door and the workers need of a job queue, whatever holds it
 * (the in-process default, or a database shared by machines). It holds job ids; what a job is
 * lives in the run store.
 */
export class QueueFullError extends Error {
  constructor(readonly capacity: number) {
    super(`the queue is full (${capacity} jobs waiting)`);
  }
}

export class QueueClosedError extends Error {
  constructor() {
    super('the service is shutting down and accepts no new jobs');
  }
}

/** A job handed to one worker, which must complete or fail it. */
export interface Lease {
  jobId: string;
}

/** The worker's side: take a job, say how it went. */
export interface LeaseSource {
  /** Waits for a job; null once the queue is closed (the worker stops) or `signal` aborts. */
  lease(signal?: AbortSignal): Promise<Lease | null>;
  complete(jobId: string): Promise<void>;
  /** The worker could not finish the job (it died, or could not record it). */
  fail(jobId: string): Promise<void>;
}

export interface QueueStats {
  depth: number;
  capacity: number;
  running: number;
  accepting: boolean;
}

/** The front door's side: admit, cancel, close. */
export interface JobQueue extends LeaseSource {
  /** `admitted` skips the capacity check: the front door checked it before storing the job, or accepted it before a restart. */
  enqueue(jobId: string, options?: { admitted?: boolean }): Promise<void>;
  /** A waiting job is removed (`dequeued`); a leased one is left to its worker to stop (`leased`). */
  cancel(jobId: string): Promise<'dequeued' | 'leased' | 'absent'>;
  /** Stops leasing; waiting jobs stay (in the store, for the next start) and are returned. */
  close(): Promise<string[]>;
  /** Resolves once no job is leased. */
  idle(): Promise<void>;
  stats(): QueueStats;
}
