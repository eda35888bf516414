import { EventEmitter, once } from 'node:events';
import type { JobStatus } from '../contract/service.js';
import { isTerminal } from '../store/port.js';

/** The worker's side of job events: it hears when a job it runs is to be stopped. */
export interface CancelSource {
  onCancel(listener: (jobId: string) => void): void;
}

export type StatusListener = (jobId: string, status: JobStatus) => void;

/**
 * The job events port: every status change (queued, running, terminal) for whoever follows a
 * job (long polls, streams), and cancellation for whoever runs it. In-process here; across
 * machines it is the database's LISTEN/NOTIFY.
 */
export interface JobEvents extends CancelSource {
  statusChanged(jobId: string, status: JobStatus): void;
  onStatus(listener: StatusListener): () => void;
  /** Resolves when the job reaches a terminal state, or when `signal` aborts (no error). */
  waitForTerminal(jobId: string, signal: AbortSignal): Promise<void>;
  requestCancel(jobId: string): void;
}

export class LocalJobEvents implements JobEvents {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  statusChanged(jobId: string, status: JobStatus): void {
    this.emitter.emit('status', jobId, status);
    if (isTerminal(status)) this.emitter.emit(`terminal:${jobId}`);
  }

  onStatus(listener: StatusListener): () => void {
    this.emitter.on('status', listener);
    return () => this.emitter.off('status', listener);
  }

  async waitForTerminal(jobId: string, signal: AbortSignal): Promise<void> {
    await once(this.emitter, `terminal:${jobId}`, { signal }).catch(() => undefined);
  }

  requestCancel(jobId: string): void {
    this.emitter.emit('cancel', jobId);
  }

  onCancel(listener: (jobId: string) => void): void {
    this.emitter.on('cancel', listener);
  }
}
