import type pg from 'pg';
import type { EventCursor, OutputStream } from '../contract/job-events.js';
import type { RunJobResult } from '../contract/run-job.js';
import { unseen, type OutputChunk } from '../jobs/output-feed.js';
import type { JobStatus } from '../contract/service.js';
import { DuplicateJobError, type StatusRecord } from '../store/port.js';
import { SCHEMA, type Database, type Queryable } from './database.js';
import { CHANNELS } from './notifications.js';

const RUNS = `${SCHEMA}.runs`;
const NOT_TERMINAL = `status IN ('queued', 'running')`;
const RECORD_COLUMNS = 'job_id, status, created_at, updated_at, trace_id, attempt, api_key';

interface RecordRow {
  job_id: string;
  status: JobStatus;
  created_at: Date;
  updated_at: Date;
  trace_id: string | null;
  attempt: number;
  api_key: string | null;
}

export interface NewRun {
  jobId: string;
  traceId: string | undefined;
  /** The API key it came with (service.apiKeys); undefined: the service token. */
  apiKey?: string;
  backend: string;
  /** As stored and shown: env values as digests. */
  request: unknown;
  /** As run: env values whole; deleted when the job ends. */
  payload: unknown;
  queueJobId: string;
}

/** A job a worker holds: the attempt it runs (results of any other attempt are discarded). */
export interface Claim {
  attempt: number;
  request: unknown;
  cancelRequested: boolean;
}

export interface Artifact {
  path: string;
  content: Buffer;
}

function toRecord(row: RecordRow): StatusRecord {
  return {
    job_id: row.job_id,
    status: row.status,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    ...(row.trace_id ? { trace_id: row.trace_id } : {}),
    attempt: row.attempt,
    ...(row.api_key === null ? {} : { api_key: row.api_key }),
  };
}

/** Sent inside the transaction that changes the status: listeners hear of it once it commits. */
async function announce(client: Queryable, jobId: string, status: JobStatus): Promise<void> {
  await client.query('SELECT pg_notify($1, $2)', [CHANNELS.status, JSON.stringify({ job_id: jobId, status })]);
}

/**
 * The run store in PostgreSQL (`agent_runner.runs` and the tables beside it). Every write that
 * ends a job is fenced by the attempt and the worker that holds it, so a job has exactly one
 * result however many workers were handed it: a late result from a worker presumed dead finds
 * its attempt superseded and is discarded.
 */
export class RunTable {
  constructor(private readonly db: Database) {}

  /** In the caller's transaction, beside the queue's own row: both or neither. */
  async insert(client: pg.PoolClient, run: NewRun): Promise<StatusRecord> {
    try {
      const { rows } = await client.query<RecordRow>(
        `INSERT INTO ${RUNS} (job_id, status, trace_id, backend, request, queue_job_id, api_key) VALUES ($1, 'queued', $2, $3, $4, $5, $6) RETURNING ${RECORD_COLUMNS}`,
        [run.jobId, run.traceId ?? null, run.backend, JSON.stringify(run.request), run.queueJobId, run.apiKey ?? null],
      );
      await client.query(`INSERT INTO ${SCHEMA}.payloads (job_id, request) VALUES ($1, $2)`, [run.jobId, JSON.stringify(run.payload)]);
      await announce(client, run.jobId, 'queued');
      await client.query('SELECT pg_notify($1, $2)', [CHANNELS.enqueued, '{}']);
      return toRecord(rows[0]!);
    } catch (error) {
      if ((error as { code?: string }).code === '23505') throw new DuplicateJobError(run.jobId);
      throw error;
    }
  }

  async get(jobId: string): Promise<(StatusRecord & { result?: RunJobResult }) | null> {
    const { rows } = await this.db.query<RecordRow & { result: RunJobResult | null }>(`SELECT ${RECORD_COLUMNS}, result FROM ${RUNS} WHERE job_id = $1`, [jobId]);
    const row = rows[0];
    if (!row) return null;
    return row.result ? { ...toRecord(row), result: row.result } : toRecord(row);
  }

  /**
   * Newest first, after the cursor job (the last of the previous page) whatever its status now;
   * of the API key `apiKey` only (undefined: the service token, which sees all). Null when no
   * job it sees has the cursor's id, which an empty page would hide.
   */
  async list(limit: number, cursorJobId: string | undefined, status: JobStatus | undefined, apiKey?: string): Promise<{ jobs: StatusRecord[]; more: boolean } | null> {
    // The tenant rule of util/tenant.ts (visibleTo), in SQL: the key's own, or all for the token.
    const visible = (alias: string, parameter: string) => `(${parameter}::text IS NULL OR ${alias}.api_key = ${parameter})`;
    if (cursorJobId !== undefined) {
      const { rowCount } = await this.db.query(`SELECT 1 FROM ${RUNS} c WHERE c.job_id = $1 AND ${visible('c', '$2')}`, [cursorJobId, apiKey ?? null]);
      if (rowCount === 0) return null;
    }
    const { rows } = await this.db.query<RecordRow>(
      `SELECT ${RECORD_COLUMNS} FROM ${RUNS} r
       WHERE ($1::text IS NULL OR r.status = $1) AND ${visible('r', '$4')}
         AND ($2::text IS NULL OR (r.created_at, r.job_id) < (SELECT c.created_at, c.job_id FROM ${RUNS} c WHERE c.job_id = $2))
       ORDER BY r.created_at DESC, r.job_id DESC LIMIT $3`,
      [status ?? null, cursorJobId ?? null, limit + 1, apiKey ?? null],
    );
    return { jobs: rows.slice(0, limit).map(toRecord), more: rows.length > limit };
  }

  async counts(): Promise<{ queued: number; running: number }> {
    const { rows } = await this.db.query<{ status: string; count: string }>(`SELECT status, count(*) FROM ${RUNS} WHERE ${NOT_TERMINAL} GROUP BY status`);
    const count = (status: string) => Number(rows.find((row) => row.status === status)?.count ?? 0);
    return { queued: count('queued'), running: count('running') };
  }

  async queueJobId(jobId: string): Promise<string | null> {
    const { rows } = await this.db.query<{ queue_job_id: string }>(`SELECT queue_job_id FROM ${RUNS} WHERE job_id = $1`, [jobId]);
    return rows[0]?.queue_job_id ?? null;
  }

  /** The request as run (env values whole) while the job has not ended; else as stored. */
  async request(jobId: string): Promise<unknown> {
    const { rows } = await this.db.query<{ request: unknown }>(
      `SELECT coalesce(p.request, r.request) AS request FROM ${RUNS} r LEFT JOIN ${SCHEMA}.payloads p USING (job_id) WHERE r.job_id = $1`,
      [jobId],
    );
    return rows[0]?.request ?? null;
  }

  /**
   * Ends a job no worker holds (queued, never claimed, or given back) with `result`: a cancel,
   * or a job given up on. False when a worker holds it or it has ended.
   */
  async endUnclaimed(jobId: string, result: RunJobResult): Promise<boolean> {
    return this.db.transaction(async (client) => {
      const { rowCount } = await client.query(
        `UPDATE ${RUNS} SET status = $2, result = $3, updated_at = clock_timestamp() WHERE job_id = $1 AND status = 'queued' AND worker_id IS NULL`,
        [jobId, result.status, JSON.stringify(result)],
      );
      if (rowCount === 0) return false;
      await client.query(`DELETE FROM ${SCHEMA}.payloads WHERE job_id = $1`, [jobId]);
      await client.query(`DELETE FROM ${SCHEMA}.output WHERE job_id = $1`, [jobId]);
      await announce(client, jobId, result.status);
      return true;
    });
  }

  /** Marks a held job to be stopped and tells its worker; false when it has ended. */
  async requestCancel(jobId: string): Promise<boolean> {
    return this.db.transaction(async (client) => {
      const { rowCount } = await client.query(`UPDATE ${RUNS} SET cancel_requested = true WHERE job_id = $1 AND ${NOT_TERMINAL}`, [jobId]);
      if (rowCount === 0) return false;
      await client.query('SELECT pg_notify($1, $2)', [CHANNELS.cancel, JSON.stringify({ job_id: jobId })]);
      return true;
    });
  }

  /** A worker takes the job for a new attempt, in the transaction that fetched it; null when it has ended (canceled while queued). */
  async claim(client: Queryable, jobId: string, workerId: string): Promise<Claim | null> {
    const { rows } = await client.query<{ attempt: number; cancel_requested: boolean }>(
      `UPDATE ${RUNS} SET attempt = attempt + 1, worker_id = $2 WHERE job_id = $1 AND ${NOT_TERMINAL} RETURNING attempt, cancel_requested`,
      [jobId, workerId],
    );
    const row = rows[0];
    if (!row) return null;
    await client.query(`INSERT INTO ${SCHEMA}.attempts (job_id, attempt, worker_id) VALUES ($1, $2, $3)`, [jobId, row.attempt, workerId]);
    const payload = await client.query<{ request: unknown }>(`SELECT request FROM ${SCHEMA}.payloads WHERE job_id = $1`, [jobId]);
    return { attempt: row.attempt, request: payload.rows[0]?.request ?? null, cancelRequested: row.cancel_requested };
  }

  async cancelRequested(jobId: string): Promise<boolean> {
    const { rows } = await this.db.query<{ cancel_requested: boolean }>(`SELECT cancel_requested FROM ${RUNS} WHERE job_id = $1`, [jobId]);
    return rows[0]?.cancel_requested ?? false;
  }

  /** The attempt's command starts; returns whether a cancel was asked for meanwhile (the worker then stops it). */
  async markRunning(jobId: string, attempt: number, workerId: string): Promise<boolean> {
    return this.db.transaction(async (client) => {
      const { rows } = await client.query<{ cancel_requested: boolean }>(
        `UPDATE ${RUNS} SET status = 'running', updated_at = clock_timestamp() WHERE job_id = $1 AND attempt = $2 AND worker_id = $3 AND status = 'queued' RETURNING cancel_requested`,
        [jobId, attempt, workerId],
      );
      if (rows[0]) await announce(client, jobId, 'running');
      return rows[0]?.cancel_requested ?? false;
    });
  }

  /**
   * The attempt's result, its artifacts and the terminal status, in one transaction; the
   * payload (env values) goes. False, and nothing stored, when the attempt is no longer the
   * job's current one: its worker was presumed dead and the job handed to another.
   */
  async finish(jobId: string, attempt: number, workerId: string, result: RunJobResult, artifacts: readonly Artifact[]): Promise<boolean> {
    return this.db.transaction(async (client) => {
      const { rowCount } = await client.query(
        `UPDATE ${RUNS} SET status = $4, result = $5, worker_id = NULL, updated_at = clock_timestamp() WHERE job_id = $1 AND attempt = $2 AND worker_id = $3 AND ${NOT_TERMINAL}`,
        [jobId, attempt, workerId, result.status, JSON.stringify(result)],
      );
      const stored = rowCount === 1;
      await client.query(`UPDATE ${SCHEMA}.attempts SET ended_at = clock_timestamp(), outcome = $3 WHERE job_id = $1 AND attempt = $2 AND outcome IS DISTINCT FROM 'result'`, [
        jobId,
        attempt,
        stored ? 'result' : 'discarded',
      ]);
      if (!stored) return false;
      for (const artifact of artifacts) {
        await client.query(`INSERT INTO ${SCHEMA}.artifacts (job_id, path, content) VALUES ($1, $2, $3)`, [jobId, artifact.path, artifact.content]);
      }
      await client.query(`DELETE FROM ${SCHEMA}.payloads WHERE job_id = $1`, [jobId]);
      await client.query(`DELETE FROM ${SCHEMA}.output WHERE job_id = $1`, [jobId]);
      await announce(client, jobId, result.status);
      return true;
    });
  }

  /**
   * Jobs held by these workers (dead, or a local worker process that died) go back to the
   * queue: no worker, status queued, the attempt ended `given_back`. Returns them, with
   * whether a cancel was asked for (those are not run again) and the attempts made.
   */
  async giveBack(
    client: Queryable,
    workerIds: readonly string[],
    jobIds?: readonly string[],
  ): Promise<Array<{ jobId: string; attempt: number; queueJobId: string; cancelRequested: boolean }>> {
    const { rows } = await client.query<{ job_id: string; attempt: number; queue_job_id: string; cancel_requested: boolean }>(
      `UPDATE ${RUNS} SET worker_id = NULL, status = 'queued', updated_at = clock_timestamp()
       WHERE worker_id = ANY($1::text[]) AND ${NOT_TERMINAL} AND ($2::text[] IS NULL OR job_id = ANY($2::text[]))
       RETURNING job_id, attempt, queue_job_id, cancel_requested`,
      [workerIds, jobIds ?? null],
    );
    for (const row of rows) {
      await client.query(`UPDATE ${SCHEMA}.attempts SET ended_at = clock_timestamp(), outcome = 'given_back' WHERE job_id = $1 AND attempt = $2 AND outcome IS NULL`, [
        row.job_id,
        row.attempt,
      ]);
      await announce(client, row.job_id, 'queued');
    }
    return rows.map((row) => ({ jobId: row.job_id, attempt: row.attempt, queueJobId: row.queue_job_id, cancelRequested: row.cancel_requested }));
  }

  /** Output an attempt wrote, stored and announced in one transaction (rows of a deleted job are dropped). */
  async appendOutput(jobId: string, attempt: number, chunks: readonly OutputChunk[]): Promise<void> {
    await this.db.transaction(async (client) => {
      await client.query(
        `INSERT INTO ${SCHEMA}.output (job_id, attempt, stream, byte_offset, text)
         SELECT $1, $2, chunk.stream, chunk.byte_offset, chunk.text FROM unnest($3::text[], $4::bigint[], $5::text[]) AS chunk(stream, byte_offset, text)
         WHERE EXISTS (SELECT 1 FROM ${RUNS} WHERE job_id = $1 AND ${NOT_TERMINAL})
         ON CONFLICT DO NOTHING`,
        [jobId, attempt, chunks.map((chunk) => chunk.stream), chunks.map((chunk) => chunk.offset), chunks.map((chunk) => chunk.text)],
      );
      await client.query('SELECT pg_notify($1, $2)', [CHANNELS.output, JSON.stringify({ job_id: jobId })]);
    });
  }

  /** What the cursor's attempt wrote past its offsets. */
  async outputSince(jobId: string, cursor: EventCursor): Promise<OutputChunk[]> {
    const { rows } = await this.db.query<{ stream: OutputStream; byte_offset: string; text: string }>(
      `SELECT stream, byte_offset, text FROM ${SCHEMA}.output
       WHERE job_id = $1 AND attempt = $2 AND ((stream = 'stdout' AND byte_offset + octet_length(text) > $3) OR (stream = 'stderr' AND byte_offset + octet_length(text) > $4))
       ORDER BY seq`,
      [jobId, cursor.attempt, cursor.stdout, cursor.stderr],
    );
    return unseen(
      rows.map((row) => ({ stream: row.stream, offset: Number(row.byte_offset), text: row.text })),
      cursor,
    );
  }

  async artifact(jobId: string, path: string): Promise<Buffer | null> {
    const { rows } = await this.db.query<{ content: Buffer }>(`SELECT content FROM ${SCHEMA}.artifacts WHERE job_id = $1 AND path = $2`, [jobId, path]);
    return rows[0]?.content ?? null;
  }

  /** Deletes ended runs past the age limit, then the oldest ended ones beyond the count limit. */
  async applyRetention(maxAgeMs: number | null, maxCount: number | null): Promise<number> {
    let deleted = 0;
    if (maxAgeMs !== null) {
      const { rowCount } = await this.db.query(`DELETE FROM ${RUNS} WHERE NOT (${NOT_TERMINAL}) AND updated_at < clock_timestamp() - make_interval(secs => $1)`, [maxAgeMs / 1000]);
      deleted += rowCount ?? 0;
    }
    if (maxCount !== null) {
      const { rowCount } = await this.db.query(
        `DELETE FROM ${RUNS} WHERE job_id IN (
           SELECT job_id FROM ${RUNS} WHERE NOT (${NOT_TERMINAL}) ORDER BY created_at, job_id
           LIMIT greatest(0, (SELECT count(*) FROM ${RUNS}) - $1))`,
        [maxCount],
      );
      deleted += rowCount ?? 0;
    }
    return deleted;
  }
}
