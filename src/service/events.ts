import { EventEmitter, once } from 'node:events';

/** The worker's side of job events: it hears when a job it runs is to be stopped. */
export interface CancelSource {
  onCancel(listener: (jobId: string) => void): void;
}

/**
 * The job events port: terminal states for whoever waits (long polls), cancellation for
 * whoever runs the job. In-process here; across machines it is the database's LISTEN/NOTIFY.
 */
export interface JobEvents extends CancelSource {
  terminal(jobId: string): void;
  /** Resolves when the job reaches a terminal state, or when `signal` aborts (no error). */
  waitForTerminal(jobId: string, signal: AbortSignal): Promise<void>;
  requestCancel(jobId: string): void;
}

export class LocalJobEvents implements JobEvents {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  terminal(jobId: string): void {
    this.emitter.emit(`terminal:${jobId}`);
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
