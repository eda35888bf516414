import { Code, ConnectError } from '@connectrpc/connect';

/**
 * How much output one stream may hold for a client that reads slower than the sandbox writes:
 * the agent's events cannot be paused, so past this the stream ends (resource_exhausted) rather
 * than the worker's memory growing; the process runs on and the client may Connect again.
 */
const MAX_QUEUED_BYTES = 32 * 1024 * 1024;
/** And at most this many events, whatever their size (a watch's events are small and many). */
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

/**
 * Events of one server stream, in order, from an agent listener (which pushes whenever the agent
 * speaks) to the response generator (which pulls as the client reads).
 */
export class StreamQueue<T> {
  private readonly items: { item: T; bytes: number }[] = [];
  private queuedBytes = 0;
  private ended = false;
  private failure: Error | undefined;
  private wake: (() => void) | undefined;
  private readonly maxBytes: number;
  private readonly maxItems: number;

  constructor(limits: { bytes?: number; items?: number } = {}) {
    this.maxBytes = limits.bytes ?? MAX_QUEUED_BYTES;
    this.maxItems = limits.items ?? MAX_QUEUED_ITEMS;
  }

  /** Queues `item`, which holds `bytes` of the client's data (its size in the worker's memory, about). */
  push(item: T, bytes = 0): void {
    if (this.ended) return;
    this.queuedBytes += bytes;
    if (this.queuedBytes > this.maxBytes || this.items.length >= this.maxItems) {
      const what = this.queuedBytes > this.maxBytes ? `${this.maxBytes} bytes` : `${this.maxItems} events`;
      this.fail(new ConnectError(`more than ${what} waited for the client to read them`, Code.ResourceExhausted));
      return;
    }
    this.items.push({ item, bytes });
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
    this.items.length = 0;
    this.end();
  }

  /**
   * The items until the end, with `keepalive.item()` after each `keepalive.idleMs` without one.
   * Rejects with the abort reason when `signal` aborts (the client left or its deadline passed),
   * so that a generator waiting here ends and runs its `finally`.
   */
  async *drain(signal: AbortSignal, keepalive?: { idleMs: number; item: () => T }): AsyncGenerator<T> {
    for (;;) {
      const next = this.items.shift();
      if (next) {
        this.queuedBytes -= next.bytes;
        yield next.item;
        continue;
      }
      if (this.failure) throw this.failure;
      if (this.ended) return;
      if ((await this.nextPush(signal, keepalive?.idleMs)) === 'idle' && keepalive) yield keepalive.item();
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
