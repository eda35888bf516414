import { EventEmitter } from 'node:events';
import pg from 'pg';

/** The channels we NOTIFY on; payloads are small JSON (a job id and a status at most). */
export const CHANNELS = {
  /** `{"job_id", "status"}` on every status change, sent in the transaction that makes it. */
  status: 'agent_runner_status',
  /** `{"job_id"}`: the worker running it stops it. */
  cancel: 'agent_runner_cancel',
  /** A job was queued: idle workers fetch at once instead of at their next poll. */
  enqueued: 'agent_runner_enqueued',
  /** `{"job_id"}`: its worker stored more output (followers read it from the table). */
  output: 'agent_runner_output',
} as const;
export type Channel = (typeof CHANNELS)[keyof typeof CHANNELS];

const RECONNECT_MS = 1_000;

/**
 * One connection that LISTENs on our channels and hands out what arrives. A notification sent
 * while it is disconnected is lost, so whoever waits on one also looks at the table now and
 * then (and on `reconnected`); it reconnects by itself, forever, until closed.
 */
export class Notifications {
  private readonly emitter = new EventEmitter().setMaxListeners(0);
  private client: pg.Client | null = null;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  /** Set once a connection was lost or refused: the next one announces `reconnected`. */
  private down = false;

  constructor(private readonly url: string) {}

  /** Resolves once listening, or after the first failed try (it keeps trying behind). */
  async start(): Promise<void> {
    await this.connect();
  }

  on(channel: Channel, listener: (payload: Record<string, unknown>) => void): () => void {
    this.emitter.on(channel, listener);
    return () => this.emitter.off(channel, listener);
  }

  /** After a reconnection: notifications may have been missed meanwhile. */
  onReconnected(listener: () => void): void {
    this.emitter.on('reconnected', listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.url, application_name: 'agent-runner-listen', connectionTimeoutMillis: 5_000 });
    const lost = () => {
      if (this.client !== client) return;
      this.client = null;
      void client.end().catch(() => undefined);
      this.scheduleReconnect();
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (message) => {
      let payload: Record<string, unknown>;
      try {
        payload = JSON.parse(message.payload ?? '{}') as Record<string, unknown>;
      } catch {
        // Not ours: nothing to hand out.
        return;
      }
      this.emitter.emit(message.channel, payload);
    });
    try {
      await client.connect();
      for (const channel of Object.values(CHANNELS)) await client.query(`LISTEN ${channel}`);
    } catch {
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
      this.scheduleReconnect();
      return;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    if (this.down) {
      this.down = false;
      this.emitter.emit('reconnected');
    }
  }

  private scheduleReconnect(): void {
    this.down = true;
    if (this.closed || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.connect();
    }, RECONNECT_MS);
    this.retry.unref();
  }
}
