import { Type, type Static } from '@sinclair/typebox';
import { BackendChoiceSchema, BackendKindSchema, RequestedBackendKindSchema } from './backend.js';
import { CheckedRecord } from './checked-record.js';
import { COMMAND_LIMITS } from './command-limits.js';
import { ERROR_CODES } from './errors.js';
import { UsageSchema } from './usage.js';

/** The run-job contract of ../shared/spec/run-job-contract.md, defined once. */

export const JOB_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$';
/** A variable of a job's environment (or a secret's): a shell's name, which every program reads back. */
const ENV_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_]*$';

const PositiveInteger = (description: string) => Type.Integer({ minimum: 1, description });

export const TraceSchema = Type.Object(
  {
    trace_id: Type.Optional(Type.String()),
    task_id: Type.Optional(Type.String()),
    agent_id: Type.Optional(Type.String()),
    workspace_id: Type.Optional(Type.String()),
  },
  { additionalProperties: true, description: 'Free-form metadata, echoed in the result.' },
);

const WorkspaceFilters = {
  include: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'Globs of files to copy (default: everything).' })),
  exclude: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'Globs to leave out, on top of the default exclusions.' })),
};

export const LocalPathWorkspaceSchema = Type.Object(
  {
    source: Type.Literal('local_path'),
    path: Type.String({ minLength: 1, description: 'Host directory to snapshot (over HTTP: only inside a configured workspace root).' }),
    ...WorkspaceFilters,
  },
  { $id: 'LocalPathWorkspace', additionalProperties: false },
);

export const InlineFileSchema = Type.Object(
  {
    path: Type.String({ minLength: 1, description: 'Relative, "/"-separated; no ".." segment.' }),
    content: Type.String(),
    encoding: Type.Optional(Type.Unsafe<'utf8' | 'base64'>({ type: 'string', enum: ['utf8', 'base64'], default: 'utf8', description: 'How content is written.' })),
    mode: Type.Optional(Type.Integer({ minimum: 0, maximum: 0o7777, description: 'Permission bits, e.g. 493 for 0o755; only the executable bits are kept.' })),
  },
  { additionalProperties: false },
);

export const InlineWorkspaceSchema = Type.Object(
  {
    source: Type.Literal('inline'),
    files: Type.Array(InlineFileSchema, { description: 'The files; their directories are made as needed.' }),
    ...WorkspaceFilters,
  },
  { $id: 'InlineWorkspace', additionalProperties: false },
);

export const ArchiveWorkspaceSchema = Type.Object(
  {
    source: Type.Literal('archive'),
    format: Type.Unsafe<'tar' | 'tar.gz'>({ type: 'string', enum: ['tar', 'tar.gz'] }),
    data: Type.String({ description: 'The archive, base64. Over HTTP it may come instead as the `workspace` part of a multipart/form-data upload.' }),
    ...WorkspaceFilters,
  },
  { $id: 'ArchiveWorkspace', additionalProperties: false },
);

export type LocalPathWorkspace = Static<typeof LocalPathWorkspaceSchema>;
export type InlineWorkspace = Static<typeof InlineWorkspaceSchema>;
export type ArchiveWorkspace = Static<typeof ArchiveWorkspaceSchema>;
/** A workspace whose files travel in the request, not named by a host path. */
export type SentWorkspace = InlineWorkspace | ArchiveWorkspace;
export type Workspace = LocalPathWorkspace | SentWorkspace;

/**
 * Told apart by `source` (a discriminator), so a mistake is reported against the alternative
 * the caller chose, not against whichever alternative a plain union lists first.
 */
export const WorkspaceSchema = Type.Unsafe<Workspace>({
  oneOf: [LocalPathWorkspaceSchema, InlineWorkspaceSchema, ArchiveWorkspaceSchema],
  discriminator: { propertyName: 'source' },
  description:
    'local_path: a host directory, snapshotted. inline: files in the request. archive: a tar or tar.gz in the request. All three give the same snapshot, and the same workspace_sha256, for the same files.',
});

export const CommandSchema = Type.Object(
  {
    argv: Type.Array(Type.String(), {
      minItems: 1,
      maxItems: COMMAND_LIMITS.args,
      description: `Never joined into a shell string. At most ${COMMAND_LIMITS.args} entries, each under ${COMMAND_LIMITS.stringBytes} bytes and ${COMMAND_LIMITS.argvBytes} together (UTF-8, a NUL each).`,
    }),
    cwd: Type.Optional(Type.String({ description: 'Relative path inside the snapshot.' })),
    env: Type.Optional(
      CheckedRecord(Type.String({ pattern: ENV_NAME_PATTERN }), Type.String(), {
        maxProperties: COMMAND_LIMITS.envVars,
        description: `Additions to the empty child environment: at most ${COMMAND_LIMITS.envVars} variables, ${COMMAND_LIMITS.envBytes} bytes as NAME=value strings.`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const CommandRuleSchema = Type.Union([
  Type.String({ minLength: 1, description: 'An allowed basename of argv[0].' }),
  Type.Object(
    {
      basename: Type.String({ minLength: 1 }),
      path: Type.Optional(Type.String({ pattern: '^/', description: 'argv[0] must resolve to this absolute path.' })),
      sha256: Type.Optional(Type.String({ pattern: '^[0-9a-f]{64}$', description: 'The resolved binary must have this digest.' })),
    },
    { additionalProperties: false },
  ),
]);

/** A port, 1 to 65535. */
const PORT = '(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])';
/** A host name or IPv4 address (labels of letters, digits and inner hyphens), or an IPv6 address in brackets. */
const HOST = '(?:(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?|\\[[0-9A-Fa-f:.]+\\])';
const EGRESS_ENTRY_PATTERN = `^${HOST}:${PORT}$`;
const MAX_EGRESS_ENTRIES = 64;
/** A domain name (at least two labels), or `*.` and one: any name below it. */
const DOMAIN = '(?:\\*\\.)?(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)+[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const DOMAIN_PATTERN = `^${DOMAIN}$`;
const DOMAIN_ENTRY_PATTERN = `^${DOMAIN}(?::${PORT})?$`;

export const NetworkPolicySchema = Type.Union(
  [
    Type.Unsafe<'none' | 'allow'>({ type: 'string', enum: ['none', 'allow'] }),
    Type.Object(
      {
        allow: Type.Array(Type.String({ pattern: EGRESS_ENTRY_PATTERN, maxLength: 261 }), {
          minItems: 1,
          maxItems: MAX_EGRESS_ENTRIES,
          description: 'host:port pairs ([v6]:port for IPv6); names are resolved on the host when the job starts and pinned in its /etc/hosts.',
        }),
      },
      { additionalProperties: false },
    ),
    Type.Object(
      {
        allow_domains: Type.Array(Type.String({ pattern: DOMAIN_ENTRY_PATTERN, maxLength: 261 }), {
          minItems: 1,
          maxItems: MAX_EGRESS_ENTRIES,
          description: 'Domain names or *.patterns, each with an optional :port (without one: 80 and 443), reached by HTTP and TLS through the egress proxy on the host.',
        }),
      },
      { additionalProperties: false },
    ),
  ],
  {
    default: 'none',
    description:
      'none: loopback only. allow: a network namespace of its own behind user-mode networking (pasta) that never reaches the host (its loopback, its addresses, link-local and metadata addresses). {allow: [...]}: the same, with TCP connections to these pairs only and no DNS. {allow_domains: [...]}: HTTP and TLS only, through an egress proxy on the host (the job gets HTTP_PROXY and HTTPS_PROXY) that decides by name (Host header, CONNECT target, TLS SNI) and refuses names that resolve to the host or private addresses; nothing else is reachable.',
  },
);
export type NetworkPolicy = Static<typeof NetworkPolicySchema>;

export const SecretSchema = Type.Object(
  {
    value: Type.String({ minLength: 1, maxLength: 8192, description: 'Never stored, never inside the job.' }),
    hosts: Type.Array(Type.String({ pattern: DOMAIN_PATTERN, maxLength: 255 }), {
      minItems: 1,
      maxItems: MAX_EGRESS_ENTRIES,
      description: 'Names or *.patterns whose requests get the value in place of the placeholder.',
    }),
  },
  { additionalProperties: false },
);

export const SecretsSchema = CheckedRecord(Type.String({ pattern: ENV_NAME_PATTERN }), SecretSchema, {
  maxProperties: 32,
  description:
    'Each name is an environment variable of the job holding a random placeholder; the egress proxy puts the value in place of the placeholder in the headers of requests to its hosts only (HTTPS through a CA made for the job). Needs policy.network {allow_domains}.',
});
export type Secrets = Static<typeof SecretsSchema>;

export const PolicySchema = Type.Object(
  {
    allowed_commands: Type.Optional(Type.Array(CommandRuleSchema, { description: 'Omitted: any command (subject to allow_shell). Given: only these.' })),
    allowed_env: Type.Optional(Type.Array(Type.String(), { description: 'Request env keys allowed; omitted or empty denies all.' })),
    allow_shell: Type.Optional(Type.Boolean({ default: false })),
    network: Type.Optional(NetworkPolicySchema),
  },
  { additionalProperties: false },
);

export const LimitsSchema = Type.Object(
  {
    timeout_ms: Type.Optional(PositiveInteger('Wall-clock limit; the whole process tree is killed.')),
    max_stdout_bytes: Type.Optional(PositiveInteger('stdout kept in the result; the rest is counted and hashed.')),
    max_stderr_bytes: Type.Optional(PositiveInteger('stderr kept in the result.')),
    max_artifact_bytes: Type.Optional(PositiveInteger('Total bytes of collected artifacts.')),
    max_artifacts: Type.Optional(Type.Integer({ minimum: 0, description: 'Number of artifacts collected.' })),
    max_record_bytes: Type.Optional(PositiveInteger('Size cap of the stored result record.')),
    memory_bytes: Type.Optional(PositiveInteger('Memory of the whole process tree.')),
    max_processes: Type.Optional(PositiveInteger('Processes and threads.')),
  },
  { additionalProperties: false },
);

export const RunJobRequestSchema = Type.Object(
  {
    job_id: Type.Optional(Type.String({ pattern: JOB_ID_PATTERN, description: 'Assigned as job_<uuid> when omitted.' })),
    trace: Type.Optional(TraceSchema),
    workspace: Type.Optional(WorkspaceSchema),
    command: CommandSchema,
    policy: Type.Optional(PolicySchema),
    secrets: Type.Optional(SecretsSchema),
    limits: Type.Optional(LimitsSchema),
    artifacts: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'Globs of files to collect from the work dir after the run.' })),
    backend: Type.Optional(BackendChoiceSchema),
  },
  { $id: 'RunJobRequest', additionalProperties: false, title: 'Run job request' },
);
export type RunJobRequest = Static<typeof RunJobRequestSchema>;
export type CommandRule = Static<typeof CommandRuleSchema>;
export type RunJobLimits = Static<typeof LimitsSchema>;

export const TERMINAL_STATUSES = ['completed', 'failed', 'timed_out', 'policy_denied', 'setup_failed', 'backend_unavailable', 'canceled'] as const;
export const JobStatusSchema = Type.Union([...TERMINAL_STATUSES, 'queued', 'running'].map((status) => Type.Literal(status)));
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

export const CapturedStreamSchema = Type.Object(
  {
    text: Type.String({ description: 'The first bytes, lossy UTF-8.' }),
    truncated: Type.Boolean(),
    observed_bytes: Type.Integer({ minimum: 0 }),
    sha256: Type.String({ description: 'Of the full stream, dropped bytes included.' }),
  },
  { additionalProperties: false },
);

export const ArtifactSchema = Type.Object(
  {
    path: Type.String({ description: 'Relative to the work dir.' }),
    size: Type.Integer({ minimum: 0 }),
    sha256: Type.String(),
    uri: Type.String({ description: 'Where the stored copy lives.' }),
  },
  { additionalProperties: false },
);

export const ErrorSchema = Type.Object(
  {
    code: Type.Union(Object.keys(ERROR_CODES).map((code) => Type.Literal(code))),
    message: Type.String(),
    details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { additionalProperties: false },
);

export const SkippedEntrySchema = Type.Object({ path: Type.String(), reason: Type.String() }, { additionalProperties: false });

export const RunJobResultSchema = Type.Object(
  {
    job_id: Type.String(),
    trace: TraceSchema,
    status: Type.Union(TERMINAL_STATUSES.map((status) => Type.Literal(status))),
    backend: Type.Object(
      { kind: Type.Union([BackendKindSchema, RequestedBackendKindSchema]) },
      { description: 'The canonical kind that ran (or would have run) the job; a kind no backend has, as it was requested.' },
    ),
    command: Type.Object({ argv: Type.Array(Type.String()), cwd: Type.String() }),
    exit_code: Type.Union([Type.Integer(), Type.Null()]),
    signal: Type.Union([Type.String(), Type.Null()]),
    stdout: CapturedStreamSchema,
    stderr: CapturedStreamSchema,
    artifacts: Type.Array(ArtifactSchema),
    artifacts_skipped: Type.Array(SkippedEntrySchema, { description: 'Entries matching an artifact glob that are not regular files: links (never followed), FIFOs, devices.' }),
    workspace: Type.Object({
      files: Type.Integer({ minimum: 0 }),
      bytes: Type.Integer({ minimum: 0 }),
      skipped: Type.Array(SkippedEntrySchema, { description: 'Entries left out: symlinks leaving the root, special files, hard links.' }),
    }),
    replay: Type.Object({
      request_sha256: Type.String({ description: 'Canonical JSON of the normalised request (job_id and trace excluded).' }),
      workspace_sha256: Type.String({ description: 'Merkle-style hash of the snapshot: sorted paths, modes, contents.' }),
      result_sha256: Type.String({ description: 'Canonical JSON of the deterministic part of the result.' }),
    }),
    policy: Type.Object({
      decision: Type.Union([Type.Literal('allowed'), Type.Literal('denied')]),
      rule: Type.String({ description: 'The rule that decided.' }),
      policy_version: Type.String({ description: 'sha256 of the effective policy.' }),
    }),
    error: Type.Optional(ErrorSchema),
    started_at: Type.String({ format: 'date-time' }),
    finished_at: Type.String({ format: 'date-time' }),
    duration_ms: Type.Integer({ minimum: 0 }),
    usage: Type.Optional(UsageSchema),
  },
  { $id: 'RunJobResult', additionalProperties: false, title: 'Run job result' },
);
export type RunJobResult = Static<typeof RunJobResultSchema>;
export type CapturedStream = Static<typeof CapturedStreamSchema>;
export type Artifact = Static<typeof ArtifactSchema>;
export type SkippedEntry = Static<typeof SkippedEntrySchema>;
