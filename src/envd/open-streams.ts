import { Code, ConnectError } from '@connectrpc/connect';
import type { StreamQueue } from './stream-queue.js';

/**
 * The server streams (Start, Connect, WatchDir) open per sandbox. An agent that ends sends no
 * more events, so without this a stream of a sandbox that expired or was killed would wait for
 * its client's deadline; ending them says at once what the SDK says of a sandbox that timed out.
 */
export class OpenStreams {
  private readonly bySandbox = new Map<string, Set<StreamQueue<unknown>>>();

  /** Tracks `queue` until the returned function is called (when its stream ends). */
  open(sandboxId: string, queue: StreamQueue<unknown>): () => void {
    let queues = this.bySandbox.get(sandboxId);
    if (!queues) this.bySandbox.set(sandboxId, (queues = new Set()));
    queues.add(queue);
    return () => {
      queues.delete(queue);
      if (queues.size === 0 && this.bySandbox.get(sandboxId) === queues) this.bySandbox.delete(sandboxId);
    };
  }

  /** Ends every stream of the sandbox as unavailable. */
  sandboxEnded(sandboxId: string): void {
    const queues = this.bySandbox.get(sandboxId);
    this.bySandbox.delete(sandboxId);
    for (const queue of queues ?? []) queue.fail(new ConnectError('the sandbox ended', Code.Unavailable));
  }
}
