import { SCHEMA, type Database } from './database.js';

/**
 * Which front door (by the address it serves on) holds each session or sandbox: both live in one
 * process, the worker of the front door that made them, and the others reach them there.
 * `agent_runner.session_owners` and `agent_runner.sandbox_owners`.
 */
export class Owners {
  constructor(
    private readonly db: Database,
    private readonly table: 'session_owners' | 'sandbox_owners',
    /** What it holds is forgotten by then whatever happens (its lifetime and the time an ended one is remembered): so is its row. */
    private readonly keepSeconds: number,
  ) {}

  async record(id: string, address: string): Promise<void> {
    await this.db.query(`INSERT INTO ${SCHEMA}.${this.table} (${this.key}, address) VALUES ($1, $2)`, [id, address]);
    await this.db.query(`DELETE FROM ${SCHEMA}.${this.table} WHERE created_at < clock_timestamp() - make_interval(secs => $1)`, [this.keepSeconds]);
  }

  /** The address of the front door that holds it; null: no front door made it (or it is long forgotten). */
  async ownerOf(id: string): Promise<string | null> {
    const { rows } = await this.db.query<{ address: string }>(`SELECT address FROM ${SCHEMA}.${this.table} WHERE ${this.key} = $1`, [id]);
    return rows[0]?.address ?? null;
  }

  /** The front doors that hold what is recorded and not yet forgotten. */
  async addresses(): Promise<string[]> {
    const { rows } = await this.db.query<{ address: string }>(
      `SELECT DISTINCT address FROM ${SCHEMA}.${this.table} WHERE created_at >= clock_timestamp() - make_interval(secs => $1)`,
      [this.keepSeconds],
    );
    return rows.map((row) => row.address);
  }

  private get key(): string {
    return this.table === 'session_owners' ? 'session_id' : 'sandbox_id';
  }
}
