import { SCHEMA, type Database } from './database.js';

/** Which front door (by the address it serves on) holds each session: `agent_runner.session_owners`. */
export class SessionOwners {
  constructor(
    private readonly db: Database,
    /** A session is forgotten by then whatever happens (its lifetime and the time an ended one is remembered): so is its row. */
    private readonly keepSeconds: number,
  ) {}

  async record(sessionId: string, address: string): Promise<void> {
    await this.db.query(`INSERT INTO ${SCHEMA}.session_owners (session_id, address) VALUES ($1, $2)`, [sessionId, address]);
    await this.db.query(`DELETE FROM ${SCHEMA}.session_owners WHERE created_at < clock_timestamp() - make_interval(secs => $1)`, [this.keepSeconds]);
  }

  /** The address of the front door that holds it; null: no front door made it (or it is long forgotten). */
  async ownerOf(sessionId: string): Promise<string | null> {
    const { rows } = await this.db.query<{ address: string }>(`SELECT address FROM ${SCHEMA}.session_owners WHERE session_id = $1`, [sessionId]);
    return rows[0]?.address ?? null;
  }
}
