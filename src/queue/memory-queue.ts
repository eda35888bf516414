import { QueueClosedError, QueueFullError, type JobQueue, type Lease, type QueueStats } from './port.js';

/**
 * The embedded queue: a bounded FIFO in this process. Workers wait on `lease` and are handed
 * jobs in arrival order; a job is leased to one worker until it completes or fails.
 */
export class MemoryQueue implements JobQueue {
  private readonly waiting: string[] = [];
  private readonly leased = new Set<string>();
  private readonly takers: Array<(lease: Lease | null) => void> = [];
  private readonly idleWaiters: Array<() => void> = [];
  private accepting = true;

  constructor(readonly capacity: number) {}

  async enqueue(jobId: string, options: { admitted?: boolean } = {}): Promise<void> {
    if (!this.accepting) throw new QueueClosedError();
    if (!options.admitted && this.waiting.length >= this.capacity) throw new QueueFullError(this.capacity);
    this.waiting.push(jobId);
    this.handOut();
  }

  lease(signal?: AbortSignal): Promise<Lease | null> {
    if (!this.accepting || signal?.aborted) return Promise.resolve(null);
    return new Promise((resolve) => {
      const take = (lease: Lease | null) => {
        signal?.removeEventListener('abort', withdraw);
        resolve(lease);
      };
      // A worker that is gone must not be handed a job.
      const withdraw = () => {
        const index = this.takers.indexOf(take);
        if (index >= 0) this.takers.splice(index, 1);
        resolve(null);
      };
      signal?.addEventListener('abort', withdraw, { once: true });
      this.takers.push(take);
      this.handOut();
    });
  }

  async complete(jobId: string): Promise<void> {
    this.release(jobId);
  }

  async fail(jobId: string): Promise<void> {
    this.release(jobId);
  }

  async cancel(jobId: string): Promise<'dequeued' | 'leased' | 'absent'> {
    const index = this.waiting.indexOf(jobId);
    if (index >= 0) {
      this.waiting.splice(index, 1);
      return 'dequeued';
    }
    return this.leased.has(jobId) ? 'leased' : 'absent';
  }

  async close(): Promise<string[]> {
    this.accepting = false;
    for (const take of this.takers.splice(0)) take(null);
    return this.waiting.splice(0);
  }

  idle(): Promise<void> {
    if (this.leased.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  stats(): QueueStats {
    return { depth: this.waiting.length, capacity: this.capacity, running: this.leased.size, accepting: this.accepting };
  }

  private handOut(): void {
    while (this.accepting && this.takers.length > 0 && this.waiting.length > 0) {
      const jobId = this.waiting.shift()!;
      this.leased.add(jobId);
      this.takers.shift()!({ jobId });
    }
  }

  private release(jobId: string): void {
    this.leased.delete(jobId);
    if (this.leased.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }
}
