import { Code, ConnectError } from '@connectrpc/connect';
import { agentCall } from './agent-errors.js';
import type { StreamQueue } from './stream-queue.js';

/**
 * Streams one sandbox may have open at once: each holds a queue and an agent subscription in the
 * worker, so a client that opens them without end is refused (resource_exhausted) past this.
 */
const MAX_STREAMS_PER_SANDBOX = 256;

/**
 * The server streams (Start, Connect, WatchDir) open per sandbox. An agent that ends sends no
 * more events, so without this a stream of a sandbox that expired or was killed would wait for
 * its client's deadline; ending them says at once what the SDK says of a sandbox that timed out.
 */
export class OpenStreams {
  private readonly bySandbox = new Map<string, Set<StreamQueue<unknown>>>();

  /** Tracks `queue` until the returned function is called (when its stream ends); throws resource_exhausted past the sandbox's share. */
  open(sandboxId: string, queue: StreamQueue<unknown>): () => void {
    let queues = this.bySandbox.get(sandboxId);
    if (!queues) this.bySandbox.set(sandboxId, (queues = new Set()));
    if (queues.size >= MAX_STREAMS_PER_SANDBOX) {
      throw new ConnectError(`sandbox ${sandboxId} has ${queues.size} streams open, the most it may; end one first`, Code.ResourceExhausted);
    }
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

/** An agent call made for a stream already counted open: when it fails, the stream never was. */
export async function closingOnFailure<T>(close: () => void, call: () => Promise<T> | T): Promise<T> {
  try {
    return await agentCall(call);
  } catch (error) {
    close();
    throw error;
  }
}
