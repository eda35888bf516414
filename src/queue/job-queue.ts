/**
 * The embedded queue: bounded FIFO, a fixed number of workers, per-job cancellation.
 * It holds ids only; what a job is and how it runs belongs to the caller's `work`.
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

export type Work = (jobId: string, signal: AbortSignal) => Promise<void>;

export class JobQueue {
  private readonly waiting: string[] = [];
  private readonly running = new Map<string, AbortController>();
  private readonly idleWaiters: Array<() => void> = [];
  private accepting = true;

  constructor(
    readonly capacity: number,
    readonly concurrency: number,
    private readonly work: Work,
  ) {}

  /** `force` skips the capacity check: jobs recovered after a restart were already accepted once. */
  push(jobId: string, force = false): void {
    if (!this.accepting) throw new QueueClosedError();
    if (!force && this.waiting.length >= this.capacity) throw new QueueFullError(this.capacity);
    this.waiting.push(jobId);
    this.pump();
  }

  /** Removes a waiting job (true), or aborts a running one (true); false when it is neither. */
  cancel(jobId: string): 'dequeued' | 'aborted' | 'absent' {
    const index = this.waiting.indexOf(jobId);
    if (index >= 0) {
      this.waiting.splice(index, 1);
      return 'dequeued';
    }
    const controller = this.running.get(jobId);
    if (!controller) return 'absent';
    controller.abort();
    return 'aborted';
  }

  get depth(): number {
    return this.waiting.length;
  }

  get runningCount(): number {
    return this.running.size;
  }

  get isAccepting(): boolean {
    return this.accepting;
  }

  /** Stops taking jobs; jobs still waiting stay where they are (the store keeps them queued). */
  close(): string[] {
    this.accepting = false;
    return this.waiting.splice(0);
  }

  /** Waits for running jobs; after `graceMs` the rest are aborted, and waited for too. */
  async drain(graceMs: number): Promise<void> {
    if (this.running.size === 0) return;
    const idle = new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    const timer = setTimeout(() => {
      for (const controller of this.running.values()) controller.abort();
    }, graceMs);
    await idle;
    clearTimeout(timer);
  }

  private pump(): void {
    while (this.running.size < this.concurrency && this.waiting.length > 0) {
      const jobId = this.waiting.shift()!;
      const controller = new AbortController();
      this.running.set(jobId, controller);
      void this.work(jobId, controller.signal).finally(() => {
        this.running.delete(jobId);
        if (this.accepting) this.pump();
        if (this.running.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
      });
    }
  }
}
