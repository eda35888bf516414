import { Type, type SchemaOptions, type Static, type TProperties, type TSchema, type TUnsafe } from '@sinclair/typebox';
import { AGENT_EXEC_SCHEMA_RELEASE } from './agent-exec-version.js';

/**
 * agent-exec's stdout responses (../shared/spec/agent-exec-response.schema.json), defined once:
 * the commands are typed with the Static types below, and the shipped
 * schemas/agent-exec-response.schema.json is AGENT_EXEC_RESPONSE_SCHEMA, written at build time.
 * It keeps the spec's layout (named shapes under `definitions`, each response the Envelope
 * allOf its own fields) and its required fields; fields the spec left undeclared are declared
 * optional, so every response it accepted is still accepted.
 */

const definitions: Record<string, TSchema> = {};

/** Files `schema` under `definitions`; the $ref returned in its place is typed as the schema itself. */
function define<T extends TSchema>(name: string, schema: T): TUnsafe<Static<T>> {
  definitions[name] = schema;
  return Type.Unsafe<Static<T>>(Type.Ref(`#/definitions/${name}`));
}

/** A closed list of strings as one `enum`, as the spec writes it (TypeBox would write an anyOf of consts). */
function StringEnum<const T extends readonly string[]>(values: T, options: SchemaOptions = {}): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ type: 'string', enum: values, ...options });
}

function Nullable<T extends TSchema>(schema: T, options: SchemaOptions = {}) {
  return Type.Union([schema, Type.Null()], options);
}

const NonNegative = Type.Integer({ minimum: 0 });
const Timestamp = Type.String({ format: 'date-time' });
const JobState = StringEnum(['running', 'exited', 'killed', 'failed', 'unknown'], {
  description: 'unknown: the record says running but its supervisor is gone.',
});
const ByteRange = Type.Tuple([NonNegative, NonNegative], {
  description:
    "[start, end) byte offsets in the job's output stream; the next page starts at end. A capped log holds only its newest part: a range never starts before its first offset.",
});
const TotalBytes = Type.Integer({ minimum: 0, description: 'Bytes the job wrote to the stream, kept or dropped.' });
const FirstOffset = Type.Optional(
  Type.Integer({
    minimum: 0,
    description:
      'The first byte offset the log still holds: 0 unless the output went past --max-log-bytes; then the oldest output was dropped and the log starts here with a truncation mark, then the newest output.',
  }),
);
const Encoding = StringEnum(['utf-8', 'utf-8-lossy'], { description: 'utf-8-lossy: bytes that were not UTF-8 were replaced by U+FFFD.' });

const Envelope = define(
  'Envelope',
  Type.Object({
    schema_version: Type.Literal(AGENT_EXEC_SCHEMA_RELEASE.version, { description: 'Schema version identifier.' }),
    ok: Type.Boolean({ description: 'True for successful responses, false for errors.' }),
    type: Type.String({ description: 'Response type discriminator.' }),
  }),
);

function response<T extends TProperties>(properties: T) {
  return Type.Intersect([Envelope, Type.Object(properties)]);
}

function successResponse<K extends TSchema, T extends TProperties>(type: K, properties: T) {
  return response({ ok: Type.Literal(true), type, ...properties });
}

const ErrorDetail = define(
  'ErrorDetail',
  Type.Object({
    code: Type.String({ description: 'Machine-readable error code (e.g. job_not_found, internal_error).' }),
    message: Type.String({ description: 'Human-readable error description.' }),
    retryable: Type.Boolean({ description: 'Whether the caller may retry the same request.' }),
  }),
);

const ErrorResponse = define('ErrorResponse', response({ ok: Type.Literal(false), type: Type.Literal('error'), error: ErrorDetail }));

const Snapshot = define(
  'Snapshot',
  Type.Object(
    {
      stdout_tail: Type.String(),
      stderr_tail: Type.String(),
      truncated: Type.Boolean(),
      encoding: Encoding,
      stdout_observed_bytes: NonNegative,
      stderr_observed_bytes: NonNegative,
      stdout_included_bytes: NonNegative,
      stderr_included_bytes: NonNegative,
    },
    { description: 'The last --tail-lines lines of each stream.' },
  ),
);

const CompressionData = define(
  'CompressionData',
  Type.Object({
    mode: StringEnum(['off', 'route', 'errors', 'tests', 'logs', 'git', 'json', 'summary']),
    applied: Type.Boolean(),
    detected_kind: Type.String(),
    stdout: Type.String(),
    stderr: Type.String(),
    stdout_original_bytes: NonNegative,
    stderr_original_bytes: NonNegative,
    stdout_compressed_bytes: NonNegative,
    stderr_compressed_bytes: NonNegative,
    omitted: Type.Boolean(),
    strategy: Type.Array(Type.String()),
  }),
);

/** How a job ended, told by every response about its state; null while it has not. */
const OUTCOME = {
  exit_code: Type.Optional(Nullable(Type.Integer())),
  exit_signal: Type.Optional(Nullable(Type.String(), { description: 'The signal that ended the job, e.g. SIGKILL.' })),
  reason: Type.Optional(Nullable(StringEnum(['timeout', 'kill']), { description: 'Why a killed job was killed.' })),
  error: Type.Optional(
    Type.String({ description: 'What went wrong: the job could not start, its sandbox could not be set up, it reached its memory limit, or its logs are incomplete.' }),
  ),
};

/** A byte range of each log and the logs themselves: what run, restart and tail answer with. */
const EXCERPT = {
  stdout: Type.String(),
  stderr: Type.String(),
  stdout_range: ByteRange,
  stderr_range: ByteRange,
  stdout_total_bytes: TotalBytes,
  stderr_total_bytes: TotalBytes,
  stdout_first_offset: FirstOffset,
  stderr_first_offset: FirstOffset,
  encoding: Encoding,
  stdout_log_path: Type.String(),
  stderr_log_path: Type.String(),
  full_log_path: Type.Optional(Type.String({ description: 'Both streams interleaved, each line timestamped.' })),
  compression: Type.Optional(CompressionData),
};

const Argv = Type.Array(Type.String());
const Tags = Type.Optional(Type.Array(Type.String(), { description: "The job's --tag labels, as given at run." }));
const Root = Type.String({ description: 'The directory the jobs live in.' });

const JobLimits = define(
  'JobLimits',
  Type.Object(
    {
      max_processes: Type.Integer({ minimum: 1, description: 'Processes and threads at once (--max-processes).' }),
      memory_bytes: Type.Integer({ minimum: 1, description: 'Memory, tmpfs pages included (--memory).' }),
      cpus: Nullable(Type.Number({ exclusiveMinimum: 0 }), { description: 'CPU bandwidth in cores (--cpus); null: no bound.' }),
      tmp_bytes: Type.Integer({ minimum: 1, description: 'Size of each private tmpfs of a workspace-sandboxed job: /tmp, /dev/shm, $HOME (--tmp-size).' }),
      max_log_bytes: Type.Integer({ minimum: 1, description: 'Bytes kept of each log (--max-log-bytes).' }),
      enforced_by: Type.Optional(
        StringEnum(['cgroup-v1', 'cgroup-v2', 'rlimits'], { description: "The job's own cgroup, or (without a writable cgroup hierarchy) rlimits only." }),
      ),
    },
    { description: 'What the job may use.' },
  ),
);

const RunLikeResponse = define(
  'RunLikeResponse',
  successResponse(StringEnum(['run', 'restart']), {
    job_id: Type.String(),
    state: JobState,
    ...OUTCOME,
    env_vars: Type.Optional(Type.Array(Type.String(), { description: 'KEY=VALUE strings with masked values replaced by ***.' })),
    snapshot: Type.Optional(Snapshot),
    waited_ms: NonNegative,
    elapsed_ms: NonNegative,
    ...EXCERPT,
  }),
);

const StatusResponse = define(
  'StatusResponse',
  successResponse(Type.Literal('status'), {
    job_id: Type.String(),
    state: JobState,
    ...OUTCOME,
    started_at: Timestamp,
    finished_at: Type.Optional(Nullable(Timestamp)),
    elapsed_ms: Type.Optional(NonNegative),
    updated_at: Type.Optional(Timestamp),
    pid: Type.Optional(Nullable(Type.Integer(), { description: 'The process the supervisor started (bwrap for a sandboxed job); null until it has.' })),
    argv: Type.Optional(Argv),
    tags: Tags,
    cwd: Type.Optional(Type.String()),
    sandbox: Type.Optional(StringEnum(['workspace', 'none'])),
    network: Type.Optional(StringEnum(['host', 'none'])),
    timeout_s: Type.Optional(Nullable(Type.Number({ minimum: 0 }))),
    limits: Type.Optional(JobLimits),
    read_paths: Type.Optional(Type.Array(Type.String(), { description: 'Host paths a workspace-sandboxed job sees read-only besides the system (--read).' })),
    write_paths: Type.Optional(Type.Array(Type.String(), { description: 'Host paths a workspace-sandboxed job may write besides its cwd (--write).' })),
    stdout_log_path: Type.Optional(Type.String()),
    stderr_log_path: Type.Optional(Type.String()),
    full_log_path: Type.Optional(Type.String()),
    stdout_total_bytes: Type.Optional(NonNegative),
    stderr_total_bytes: Type.Optional(NonNegative),
    stdout_first_offset: FirstOffset,
    stderr_first_offset: FirstOffset,
  }),
);

const TailResponse = define('TailResponse', successResponse(Type.Literal('tail'), { job_id: Type.String(), state: Type.Optional(JobState), ...EXCERPT }));

const WaitResponse = define('WaitResponse', successResponse(Type.Literal('wait'), { job_id: Type.String(), state: JobState, ...OUTCOME, waited_ms: Type.Optional(NonNegative) }));

const KillResponse = define(
  'KillResponse',
  successResponse(Type.Literal('kill'), {
    job_id: Type.String(),
    state: Type.Optional(JobState),
    ...OUTCOME,
    signal: Type.String({ description: 'The first signal sent; SIGKILL follows after the kill-after of the job.' }),
    signalled: Type.Optional(Type.Boolean({ description: 'False when the job had already ended and nothing was signalled.' })),
  }),
);

/** A job in a few fields: what list shows of each, and what delete and gc say they removed. */
const SUMMARY = {
  job_id: Type.String(),
  state: JobState,
  exit_code: Type.Optional(Nullable(Type.Integer())),
  started_at: Timestamp,
  finished_at: Type.Optional(Nullable(Timestamp)),
  updated_at: Type.Optional(Nullable(Timestamp)),
  argv: Type.Optional(Argv),
  tags: Tags,
};

const JobSummary = define('JobSummary', Type.Object(SUMMARY));

const ListResponse = define(
  'ListResponse',
  successResponse(Type.Literal('list'), {
    root: Root,
    jobs: Type.Array(JobSummary, { description: 'Newest first.' }),
    truncated: Type.Boolean({ description: 'More jobs matched than --limit.' }),
    skipped: Type.Integer({ minimum: 0, description: 'Job directories that could not be read.' }),
  }),
);

const DeleteResponse = define(
  'DeleteResponse',
  successResponse(Type.Literal('delete'), {
    root: Root,
    ...SUMMARY,
  }),
);

const RetiredJob = define(
  'RetiredJob',
  Type.Object({
    ...SUMMARY,
    reason: StringEnum(['age', 'count'], { description: 'age: it ended before the age limit; count: the oldest ended job beyond the count limit.' }),
  }),
);

const GcResponse = define(
  'GcResponse',
  successResponse(Type.Literal('gc'), {
    root: Root,
    dry_run: Type.Boolean({ description: 'True: nothing was deleted; jobs lists what would have been.' }),
    policy_source: StringEnum(['flags', 'config'], { description: 'flags: --older-than and --keep; config: the retention section of the configuration (no flag given).' }),
    older_than_s: Nullable(Type.Number({ minimum: 0 }), { description: 'Jobs that ended longer ago than this went (null: no age limit).' }),
    keep: Nullable(Type.Integer({ minimum: 0 }), { description: 'At most this many jobs were kept, the oldest ended ones going first (null: no count limit).' }),
    jobs: Type.Array(RetiredJob, { description: 'The jobs deleted (or, with dry_run, that would be), oldest first. Running and unknown jobs never are.' }),
    deleted: NonNegative,
    kept: Type.Integer({ minimum: 0, description: 'Jobs left (or, with dry_run, that would be).' }),
    skipped: Type.Integer({ minimum: 0, description: 'Job directories that could not be read, left alone.' }),
  }),
);

const HelpEntry = define('HelpEntry', Type.Object({ term: Type.String(), description: Type.String() }));

const HelpResponse = define(
  'HelpResponse',
  successResponse(Type.Literal('help'), {
    command: Type.String({ description: 'Whose help this is, e.g. "agent-exec run".' }),
    usage: Type.String(),
    description: Type.String(),
    commands: Type.Array(HelpEntry, { description: 'Its subcommands.' }),
    arguments: Type.Array(HelpEntry),
    options: Type.Array(HelpEntry, { description: 'Each term is the flags; the description ends with the choices and default, if any.' }),
    text: Type.String({ description: 'The same help as text for people.' }),
  }),
);

const SchemaResponse = define(
  'SchemaResponse',
  successResponse(Type.Literal('schema'), {
    schema_format: Type.Literal('json-schema-draft-07', { description: 'The JSON Schema specification version.' }),
    schema: Type.Unsafe<Record<string, unknown>>({ type: 'object', description: 'The full JSON Schema document.' }),
    generated_at: Type.String({ description: 'RFC 3339 timestamp of when the schema was last updated.' }),
  }),
);

const RESPONSES = [
  ErrorResponse,
  RunLikeResponse,
  StatusResponse,
  TailResponse,
  WaitResponse,
  KillResponse,
  ListResponse,
  SchemaResponse,
  DeleteResponse,
  GcResponse,
  HelpResponse,
];

/** The document shipped as schemas/agent-exec-response.schema.json (TypeBox's symbols drop out of its JSON). */
export const AGENT_EXEC_RESPONSE_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  $comment: AGENT_EXEC_SCHEMA_RELEASE.updated_at,
  title: 'agent-exec CLI response schema',
  description: `JSON Schema for all stdout responses produced by agent-exec v${AGENT_EXEC_SCHEMA_RELEASE.version}.`,
  definitions,
  oneOf: RESPONSES,
};

export type AgentExecResponse = Static<(typeof RESPONSES)[number]>;
export type ErrorResponse = Static<typeof ErrorResponse>;
export type RunLikeResponse = Static<typeof RunLikeResponse>;
export type JobSummary = Static<typeof JobSummary>;
export type RetiredJob = Static<typeof RetiredJob>;
export type Snapshot = Static<typeof Snapshot>;
export type JobState = Static<typeof JobState>;
