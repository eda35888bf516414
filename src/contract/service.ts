import { Type, type Static } from '@sinclair/typebox';
import { BackendDescriptionSchema } from './backend.js';
import { ERROR_CODES } from './errors.js';
import { ArtifactSchema, JobStatusSchema, RunJobResultSchema } from './run-job.js';

/** Shapes of the HTTP service around the run-job contract. */
export type JobStatus = Static<typeof JobStatusSchema>;

/** Every code with its status and meaning, derived from the table, so the schema (and the OpenAPI document) lists them. */
const ERROR_CODE_MEANINGS = `HTTP 200 marks an outcome in a run's result rather than a refused request. ${Object.entries(ERROR_CODES)
  .map(([code, { http, description }]) => `${code} (HTTP ${http}): ${description}`)
  .join('; ')}`;

export const ErrorBodySchema = Type.Object(
  {
    error: Type.Object({
      code: Type.Union(
        Object.keys(ERROR_CODES).map((code) => Type.Literal(code)),
        { description: ERROR_CODE_MEANINGS },
      ),
      message: Type.String(),
      details: Type.Optional(
        Type.Record(Type.String(), Type.Unknown(), {
          description:
            "What the failure is about, as the code has it: a validation failure's `field` and `in` (body, querystring...), a cap's `limit`, a denied command's `argv0`...",
        }),
      ),
    }),
  },
  { $id: 'ErrorBody', title: 'Error' },
);

export const JobAcceptedSchema = Type.Object({ job_id: Type.String(), status: Type.Literal('queued') }, { $id: 'JobAccepted' });

/** What a cancel answers: the job's status after it (cancelled, or the end it reached first). */
export const JobCancelledSchema = Type.Object({ job_id: Type.String(), status: JobStatusSchema }, { $id: 'JobCancelled' });
export type JobCancelled = Static<typeof JobCancelledSchema>;

/** A terminal job's artifacts, as its result lists them. */
export const ArtifactListSchema = Type.Object({ job_id: Type.String(), artifacts: Type.Array(ArtifactSchema) }, { $id: 'ArtifactList' });
export type ArtifactList = Static<typeof ArtifactListSchema>;

export const JobStateSchema = Type.Object(
  {
    job_id: Type.String(),
    status: JobStatusSchema,
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    trace_id: Type.Optional(Type.String()),
    attempt: Type.Optional(Type.Integer({ minimum: 0, description: 'Attempts made so far (distributed mode): above 1 when a worker died mid-job and another ran it again.' })),
    api_key: Type.Optional(
      Type.String({ description: 'The name of the API key that submitted it (service.apiKeys); absent: the service token. Only that key and the service token see it.' }),
    ),
    result: Type.Optional(RunJobResultSchema),
  },
  { $id: 'JobState', title: 'Job state' },
);

export const JobPageSchema = Type.Object(
  {
    jobs: Type.Array(
      Type.Object({
        job_id: Type.String(),
        status: JobStatusSchema,
        created_at: Type.String(),
        updated_at: Type.String(),
        trace_id: Type.Optional(Type.String()),
        attempt: Type.Optional(Type.Integer({ minimum: 0 })),
        api_key: Type.Optional(Type.String()),
      }),
    ),
    next_cursor: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'JobPage' },
);

export const HealthSchema = Type.Object(
  {
    status: Type.Union([Type.Literal('ok'), Type.Literal('degraded')], {
      description: 'degraded: the run store cannot take writes (submissions get 503 store.unavailable), or holds job records it still owes; reads are served either way',
    }),
    queue: Type.Object({ depth: Type.Integer(), capacity: Type.Integer(), running: Type.Integer(), concurrency: Type.Integer(), accepting: Type.Boolean() }),
    exec: Type.Object(
      { running: Type.Integer(), waiting: Type.Integer(), concurrency: Type.Integer() },
      { description: 'snippets (/v1/exec) and code tasks (/v1/tasks): running, waiting for one of the concurrency slots they share' },
    ),
    store: Type.Object({
      writable: Type.Boolean(),
      error: Type.Optional(Type.String({ description: 'what the last refused write met: ENOSPC, EDQUOT, EIO or EROFS' })),
      since: Type.Optional(Type.String({ format: 'date-time' })),
      held_jobs: Type.Integer({ description: 'jobs whose status or result is held in memory until the store takes it' }),
    }),
    backend: BackendDescriptionSchema,
    preparing: Type.Array(Type.String(), {
      description: 'backend kinds still being prepared (probes, a guest image build): jobs for them wait until they are ready; empty once every backend is prepared',
    }),
  },
  { $id: 'Health' },
);
