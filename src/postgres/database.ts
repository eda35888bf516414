import pg from 'pg';
import { StoreUnavailableError } from '../store/port.js';
import { MIGRATIONS } from './migrations.js';

/** The schema every table of ours lives in (pg-boss keeps its own, `pgboss`). */
export const SCHEMA = 'agent_runner';

export type Queryable = Pick<pg.PoolClient, 'query'>;

/**
 * SQLSTATE classes and codes that mean "the database cannot be reached or is going away", not
 * "this statement is wrong": 08 connection exception, 57P01-57P03 shutdown and start-up, 53300
 * too many connections.
 */
const UNREACHABLE_STATES = /^(08|57P0[123]|53300)/;
const UNREACHABLE_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOENT', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND']);

/** The database is away (refused, reset, shutting down): what a caller sees as 503 store.unavailable. */
export function isUnreachable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (UNREACHABLE_STATES.test(code) || UNREACHABLE_ERRNOS.has(code))) return true;
  return /Connection terminated|connection timeout|Client has encountered a connection error|Connection ended/i.test(error.message);
}

function unreachable(error: unknown): unknown {
  if (!isUnreachable(error)) return error;
  const code = (error as { code?: unknown }).code;
  return new StoreUnavailableError(`database unreachable: ${typeof code === 'string' ? code : (error as Error).message}`, { cause: error });
}

/**
 * The PostgreSQL database the distributed mode shares: a connection pool whose errors of
 * reach become StoreUnavailableError (so the front door answers 503 and recovers by itself
 * when the database returns: the pool opens new connections on the next query), and the
 * migrations of our schema, applied once under an advisory lock by whichever process starts
 * first.
 */
interface HeldConnection {
  client: pg.PoolClient;
  /** Cut while held: released to be dropped, never to be used again. */
  broken: boolean;
  release(): void;
}

export class Database {
  readonly pool: pg.Pool;

  constructor(
    readonly url: string,
    options: { max?: number; applicationName?: string } = {},
  ) {
    this.pool = new pg.Pool({
      connectionString: url,
      max: options.max ?? 10,
      application_name: options.applicationName ?? 'agent-runner',
      connectionTimeoutMillis: 5_000,
      idleTimeoutMillis: 30_000,
    });
    // An idle connection cut by the server (a restart) must not crash the process: the pool drops it.
    this.pool.on('error', () => undefined);
  }

  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(text, values);
    } catch (error) {
      throw unreachable(error);
    }
  }

  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const held = await this.connect();
    const { client } = held;
    try {
      await client.query('BEGIN');
      const value = await work(client);
      await client.query('COMMIT');
      return value;
    } catch (error) {
      if (isUnreachable(error)) held.broken = true;
      if (!held.broken) await client.query('ROLLBACK').catch(() => undefined);
      throw unreachable(error);
    } finally {
      held.release();
    }
  }

  /**
   * Runs `work` while holding a cluster-wide lock of that name (a session advisory lock on a
   * connection of its own): processes starting together take turns.
   */
  async exclusively<T>(name: string, work: () => Promise<T>): Promise<T> {
    const held = await this.connect();
    const { client } = held;
    try {
      await client.query('SELECT pg_advisory_lock(hashtext($1))', [`${SCHEMA}.${name}`]);
      try {
        return await work();
      } finally {
        await client.query('SELECT pg_advisory_unlock(hashtext($1))', [`${SCHEMA}.${name}`]).catch(() => undefined);
      }
    } catch (error) {
      throw unreachable(error);
    } finally {
      held.release();
    }
  }

  /** Brings our schema to the newest version; call it under exclusively(), as Cluster.open does. */
  async migrate(): Promise<void> {
    await this.transaction(async (client) => {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
      await client.query(`CREATE TABLE IF NOT EXISTS ${SCHEMA}.migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
      const applied = new Set((await client.query<{ version: number }>(`SELECT version FROM ${SCHEMA}.migrations`)).rows.map((row) => row.version));
      for (const [index, statements] of MIGRATIONS.entries()) {
        const version = index + 1;
        if (applied.has(version)) continue;
        await client.query(statements);
        await client.query(`INSERT INTO ${SCHEMA}.migrations (version) VALUES ($1)`, [version]);
      }
    });
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  /**
   * A connection of the pool, held until `release`. The pool listens for a connection's errors
   * only while it is idle: one cut while held and between queries (the database stopping under a
   * transaction whose work awaits something else) would emit an 'error' no one hears, which ends
   * the process. Heard here, it marks the connection broken (its next query fails as unreachable)
   * and the pool drops it on release.
   */
  private async connect(): Promise<HeldConnection> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw unreachable(error);
    }
    const held: HeldConnection = {
      client,
      broken: false,
      release: () => {
        client.removeListener('error', cut);
        client.release(held.broken);
      },
    };
    const cut = () => {
      held.broken = true;
    };
    client.on('error', cut);
    return held;
  }
}
