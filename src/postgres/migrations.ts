/**
 * Our schema, as the ordered steps that build it: a database is at version N once steps 1..N
 * ran (`agent_runner.migrations`). Steps are only ever appended, never edited.
 */
export const MIGRATIONS: readonly string[] = [
  `
  -- One row per job: what the front doors answer from. The request keeps env values only as digests.
  CREATE TABLE agent_runner.runs (
    job_id text PRIMARY KEY,
    status text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    trace_id text,
    backend text NOT NULL,
    request jsonb NOT NULL,
    result jsonb,
    -- Attempts made so far; the worker holding the current one (null: nobody, it waits in the queue).
    attempt integer NOT NULL DEFAULT 0,
    worker_id text,
    queue_job_id uuid NOT NULL,
    cancel_requested boolean NOT NULL DEFAULT false
  );
  CREATE INDEX runs_newest ON agent_runner.runs (created_at DESC, job_id DESC);
  CREATE INDEX runs_by_status ON agent_runner.runs (status, created_at DESC, job_id DESC);
  CREATE INDEX runs_by_worker ON agent_runner.runs (worker_id) WHERE worker_id IS NOT NULL;

  -- The whole request, env values included, for the worker that runs it: deleted when the job ends.
  CREATE TABLE agent_runner.payloads (
    job_id text PRIMARY KEY REFERENCES agent_runner.runs ON DELETE CASCADE,
    request jsonb NOT NULL
  );

  CREATE TABLE agent_runner.artifacts (
    job_id text NOT NULL REFERENCES agent_runner.runs ON DELETE CASCADE,
    path text NOT NULL,
    content bytea NOT NULL,
    PRIMARY KEY (job_id, path)
  );

  -- Every attempt and how it ended: result (the one stored), discarded (a late result from a
  -- worker presumed dead), given_back (its worker died; the job went back to the queue).
  CREATE TABLE agent_runner.attempts (
    job_id text NOT NULL REFERENCES agent_runner.runs ON DELETE CASCADE,
    attempt integer NOT NULL,
    worker_id text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at timestamptz,
    outcome text,
    PRIMARY KEY (job_id, attempt)
  );

  -- Live workers: what they can run, and when they last said they were alive (database time).
  CREATE TABLE agent_runner.workers (
    worker_id text PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    slots integer NOT NULL,
    kinds jsonb NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp()
  );
  `,
  `
  -- Output of running jobs as their workers write it, for followers of the events stream; a
  -- job's rows go with its result (which holds the same output). Offsets are UTF-8 bytes.
  CREATE TABLE agent_runner.output (
    job_id text NOT NULL REFERENCES agent_runner.runs ON DELETE CASCADE,
    attempt integer NOT NULL,
    stream text NOT NULL,
    byte_offset bigint NOT NULL,
    text text NOT NULL,
    -- The order the worker stored them in, across both streams.
    seq bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (job_id, attempt, stream, byte_offset)
  );
  `,
  `
  -- Which front door's worker holds a session (sessions live in one process): the others
  -- forward its calls there. Rows outlive their session by at most its lifetime.
  CREATE TABLE agent_runner.session_owners (
    session_id text PRIMARY KEY,
    address text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
  );
  CREATE INDEX session_owners_by_age ON agent_runner.session_owners (created_at);
  `,
  `
  -- Which front door's worker holds a long-lived sandbox: the others forward its traffic there.
  CREATE TABLE agent_runner.sandbox_owners (
    sandbox_id text PRIMARY KEY,
    address text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
  );
  CREATE INDEX sandbox_owners_by_age ON agent_runner.sandbox_owners (created_at);
  `,
  `
  -- The API key a job came with (service.apiKeys; null: the service token): only that key and
  -- the token see it. A key's listing reads its own jobs, newest first.
  ALTER TABLE agent_runner.runs ADD COLUMN api_key text;
  CREATE INDEX runs_by_key ON agent_runner.runs (api_key, created_at DESC, job_id DESC) WHERE api_key IS NOT NULL;
  `,
];
