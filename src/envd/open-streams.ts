import { Code, ConnectError } from '@connectrpc/connect';
import { agentCall } from './agent-errors.js';
import { StreamQueue, type QueueBudget } from './stream-queue.js';
import { addCount } from '../util/count-map.js';

/** What server streams may hold in the worker (sandboxes.streams): each holds a queue and an agent subscription. */
export interface StreamLimits {
  /** Streams one sandbox may have open at once. */
  maxPerSandbox: number;
  /** Streams the sandboxes of one API key may have open at once, together (the service token's are not counted). */
  maxPerKey: number;
  /** Bytes one stream of a process's output may hold for its client: the process's window and one chunk of the agent's output beyond it. */
  maxQueuedBytes: number;
  /** Bytes the streams of one sandbox may hold together; past it the stream that would grow ends. */
  maxQueuedBytesPerSandbox: number;
  /** Bytes the streams of one API key's sandboxes may hold together (the service token's are not counted). */
  maxQueuedBytesPerKey: number;
}

/** One open stream: the queue its events wait in, and what ends it. */
export interface OpenStream<T> {
  queue: StreamQueue<T>;
  /** Call when the stream ends: it no longer counts against its sandbox and key. */
  close(): void;
}

/**
 * The server streams (Start, Connect, WatchDir) open per sandbox and per API key, and the bytes
 * they hold for their clients, refused (resource_exhausted) past their share: a new stream past
 * the count, a stream that would grow past the bytes ends. An agent that ends sends no more events, so without this
 * a stream of a sandbox that expired or was killed would wait for its client's deadline; ending
 * them says at once what the SDK says of a sandbox that timed out.
 */
export class OpenStreams {
  private readonly bySandbox = new Map<string, Set<StreamQueue<unknown>>>();
  private readonly byKey = new Map<string, number>();
  private readonly queuedBySandbox = new Map<string, number>();
  private readonly queuedByKey = new Map<string, number>();

  constructor(private readonly limits: StreamLimits) {}

  /**
   * A new stream of the sandbox (made by the key named `apiKey`; undefined: the service token),
   * tracked until it is closed, which may hold `maxBytes` (a process's window by default).
   */
  open<T>(sandboxId: string, apiKey: string | undefined, maxBytes = this.limits.maxQueuedBytes): OpenStream<T> {
    let queues = this.bySandbox.get(sandboxId);
    if ((queues?.size ?? 0) >= this.limits.maxPerSandbox) {
      throw new ConnectError(`sandbox ${sandboxId} has ${queues!.size} streams open, the most it may; end one first`, Code.ResourceExhausted);
    }
    const ofKey = apiKey === undefined ? 0 : (this.byKey.get(apiKey) ?? 0);
    if (apiKey !== undefined && ofKey >= this.limits.maxPerKey) {
      throw new ConnectError(`the sandboxes of API key ${apiKey} have ${ofKey} streams open, the most they may; end one first`, Code.ResourceExhausted);
    }
    if (!queues) this.bySandbox.set(sandboxId, (queues = new Set()));
    if (apiKey !== undefined) addCount(this.byKey, apiKey, 1);
    const queue = new StreamQueue<T>({ bytes: maxBytes, budget: this.budget(sandboxId, apiKey) });
    const tracked = queues;
    tracked.add(queue);
    let closed = false;
    return {
      queue,
      close: () => {
        if (closed) return;
        closed = true;
        tracked.delete(queue);
        if (tracked.size === 0 && this.bySandbox.get(sandboxId) === tracked) this.bySandbox.delete(sandboxId);
        if (apiKey !== undefined) addCount(this.byKey, apiKey, -1);
      },
    };
  }

  /** Bytes the open streams of a sandbox hold for their clients. */
  queuedBytes(sandboxId: string): number {
    return this.queuedBySandbox.get(sandboxId) ?? 0;
  }

  /** What the streams of one sandbox (and its key) share. */
  private budget(sandboxId: string, apiKey: string | undefined): QueueBudget {
    const { maxQueuedBytesPerSandbox: perSandbox, maxQueuedBytesPerKey: perKey } = this.limits;
    return {
      take: (bytes) => {
        if (this.queuedBytes(sandboxId) + bytes > perSandbox) return `the streams of sandbox ${sandboxId} hold more than ${perSandbox} bytes their clients have not read`;
        if (apiKey !== undefined && (this.queuedByKey.get(apiKey) ?? 0) + bytes > perKey) {
          return `the streams of API key ${apiKey} hold more than ${perKey} bytes their clients have not read`;
        }
        addCount(this.queuedBySandbox, sandboxId, bytes);
        if (apiKey !== undefined) addCount(this.queuedByKey, apiKey, bytes);
        return null;
      },
      give: (bytes) => {
        addCount(this.queuedBySandbox, sandboxId, -bytes);
        if (apiKey !== undefined) addCount(this.queuedByKey, apiKey, -bytes);
      },
    };
  }

  /** Ends every stream of the sandbox as unavailable, in the words E2B's SDK uses of a sandbox killed under a request (its TimeoutError). */
  sandboxEnded(sandboxId: string): void {
    const queues = this.bySandbox.get(sandboxId);
    this.bySandbox.delete(sandboxId);
    for (const queue of queues ?? []) queue.fail(new ConnectError('the sandbox was killed or reached its end of life', Code.Unavailable));
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
