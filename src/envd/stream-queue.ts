import { Code, ConnectError } from '@connectrpc/connect';

/** At most this many events, whatever their size (a watch's events are small and many). */
const MAX_QUEUED_ITEMS = 100_000;

/** envd's interval when the client names none (permissions/keepalive.go). */
const DEFAULT_KEEPALIVE_SECONDS = 90;
const MAX_KEEPALIVE_SECONDS = 24 * 60 * 60;

/** The silence after which a stream sends a keepalive event: the client's `Keepalive-Ping-Interval` (seconds), as envd reads it. */
export function keepaliveIdleMs(headers: Headers): number {
  const seconds = Number(headers.get('keepalive-ping-interval'));
  const valid = Number.isInteger(seconds) && seconds > 0 && seconds <= MAX_KEEPALIVE_SECONDS;
  return (valid ? seconds : DEFAULT_KEEPALIVE_SECONDS) * 1000;
}

type Queued<T> = { item: T; bytes: number; taken?: () => void };

/** What several queues share (a sandbox's, a key's): a queue takes bytes from it as it grows and gives them back as it empties. */
export interface QueueBudget {
  /** Takes `bytes`; a message saying which bound it would pass instead, taking nothing. */
  take(bytes: number): string | null;
  give(bytes: number): void;
}

/**
 * Events of one server stream, in order, from an agent listener (which pushes whenever the agent
 * speaks) to the response generator (which pulls as the client reads). A process's output is
 * held to its window before it gets here (the agent stops reading the process until the client
 * took what is queued: `taken`); what cannot be paused (a watch's events) ends the stream
 * (resource_exhausted) past `bytes` or MAX_QUEUED_ITEMS rather than the worker's memory growing.
 */
export class StreamQueue<T> {
  private readonly items: Queued<T>[] = [];
  private queued = 0;
  private ended = false;
  private failure: Error | undefined;
  private wake: (() => void) | undefined;
  private readonly maxBytes: number;
  private readonly maxItems: number;
  private readonly budget: QueueBudget | undefined;

  constructor(limits: { bytes: number; items?: number; budget?: QueueBudget }) {
    this.maxBytes = limits.bytes;
    this.maxItems = limits.items ?? MAX_QUEUED_ITEMS;
    this.budget = limits.budget;
  }

  /** Bytes of the client's data waiting in the queue. */
  get queuedBytes(): number {
    return this.queued;
  }

  /**
   * Queues `item`, which holds `bytes` of the client's data (its size in the worker's memory,
   * about). `taken` is called once it leaves the queue: sent to the client, or dropped (the
   * stream failed, or its client left).
   */
  push(item: T, bytes = 0, taken?: () => void): void {
    if (this.ended) return taken?.();
    const over =
      this.queued + bytes > this.maxBytes
        ? `more than ${this.maxBytes} bytes waited for the client to read them`
        : this.items.length >= this.maxItems
          ? `more than ${this.maxItems} events waited for the client to read them`
          : (this.budget?.take(bytes) ?? null);
    if (over !== null) {
      this.fail(new ConnectError(over, Code.ResourceExhausted));
      return taken?.();
    }
    this.queued += bytes;
    this.items.push({ item, bytes, ...(taken && { taken }) });
    this.wake?.();
  }

  /** No more items: the stream ends once the queued ones are read. */
  end(): void {
    this.ended = true;
    this.wake?.();
  }

  /** The stream ends with `error`, queued items dropped. */
  fail(error: Error): void {
    this.failure = error;
    this.drop();
    this.end();
  }

  /** Empties the queue, each item told it left. */
  private drop(): void {
    const dropped = this.items.splice(0);
    this.budget?.give(this.queued);
    this.queued = 0;
    for (const { taken } of dropped) taken?.();
  }

  /**
   * The items until the end, with `keepalive.item()` after each `keepalive.idleMs` without one.
   * Rejects with the abort reason when `signal` aborts (the client left or its deadline passed),
   * so that a generator waiting here ends and runs its `finally`.
   */
  async *drain(signal: AbortSignal, keepalive?: { idleMs: number; item: () => T }): AsyncGenerator<T> {
    try {
      for (;;) {
        const next = this.items.shift();
        if (next) {
          this.queued -= next.bytes;
          this.budget?.give(next.bytes);
          next.taken?.();
          yield next.item;
          continue;
        }
        if (this.failure) throw this.failure;
        if (this.ended) return;
        if ((await this.nextPush(signal, keepalive?.idleMs)) === 'idle' && keepalive) yield keepalive.item();
      }
    } finally {
      // The client left (or the stream ended): nothing waits for what it did not read.
      this.ended = true;
      this.drop();
    }
  }

  private nextPush(signal: AbortSignal, idleMs: number | undefined): Promise<'pushed' | 'idle'> {
    signal.throwIfAborted();
    return new Promise((resolve, reject) => {
      const settle = (outcome: () => void): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.wake = undefined;
        outcome();
      };
      const onAbort = (): void => settle(() => reject(signal.reason));
      const timer = idleMs === undefined ? undefined : setTimeout(() => settle(() => resolve('idle')), idleMs);
      this.wake = () => settle(() => resolve('pushed'));
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}
