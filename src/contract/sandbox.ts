import { Type, type Static } from '@sinclair/typebox';
import { BackendChoiceSchema, BackendKindSchema, PauseKindSchema } from './backend.js';
import { EnvVarsSchema, MetadataSchema } from './checked-record.js';
import { AgentUserSchema } from './sandbox-agent.js';
import { VolumeMountSchema } from './volumes.js';

/**
 * Long-lived sandboxes: a sandbox that runs until it is killed or its timeout passes, with
 * processes (pipes or a terminal), files and watches served by an agent inside it. The E2B face
 * (E2B's control plane and envd) and `/v1/sandboxes` are two views of these; this is ours,
 * defined once for the HTTP routes, the typed client, the CLI and the MCP tools.
 */

/** Lower-case letters and digits only, so that `{port}-{id}.{domain}` is a host name. */
export const SANDBOX_ID_PATTERN = '^[0-9a-z]{24}$';

const Metadata = MetadataSchema({ description: 'Labels kept with the sandbox, for listing by filter.' });
const EnvVars = EnvVarsSchema({ valueLength: 32768, description: 'Environment of every process the sandbox runs (a process may add its own).' });

export const SandboxCreateRequestSchema = Type.Object(
  {
    template: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'What the sandbox starts from; `base` when omitted.' })),
    timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, description: 'The sandbox is killed this long after it starts unless extended (default 300).' })),
    metadata: Type.Optional(Metadata),
    env_vars: Type.Optional(EnvVars),
    secure: Type.Optional(
      Type.Boolean({ description: 'Its envd answers only requests with its access token (`X-Access-Token`), and file URLs are signed with it. Default true.' }),
    ),
    allow_internet_access: Type.Optional(Type.Boolean({ description: 'Egress to the internet (never to the host). Default: what the server allows.' })),
    backend: Type.Optional(BackendChoiceSchema),
    on_timeout: Type.Optional(
      Type.Union([Type.Literal('kill'), Type.Literal('pause')], {
        description: 'What its timeout does: kill it (the default), or pause it, keeping what a pause keeps (E2B’s autoPause).',
      }),
    ),
    on_timeout_keep_memory: Type.Optional(
      Type.Boolean({
        description:
          "What the pause at its timeout keeps: true its processes' memory too (refused, sandbox.pause_unsupported, where its backend keeps files only), false its files only; omitted: as much as its backend keeps (E2B’s autoPauseMemory).",
      }),
    ),
    auto_resume: Type.Optional(
      Type.Boolean({
        description: 'Once paused, it resumes by itself when a request comes for it (its envd), as a connect would. Default false (E2B’s autoResume).',
      }),
    ),
    allow_public_traffic: Type.Optional(
      Type.Boolean({
        description:
          'false: every request to a port of the sandbox (`{port}-{id}.{domain}`) carries its access token as `e2b-traffic-access-token`; needs `secure`. Default true: any client reaches its ports (E2B’s allowPublicTraffic).',
      }),
    ),
    mask_request_host: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 253,
        pattern: '^[^\\s]+$',
        description: 'The Host header the servers on its ports see, `${PORT}` the port asked; default the client’s (E2B’s maskRequestHost).',
      }),
    ),
    volume_mounts: Type.Optional(
      Type.Array(VolumeMountSchema, {
        maxItems: 8,
        description: 'Volumes of its API key mounted in it (docs/volumes.md); a resume or fork of it mounts them again.',
      }),
    ),
  },
  { $id: 'SandboxCreateRequest', additionalProperties: false, title: 'Create a sandbox' },
);
export type SandboxCreateRequest = Static<typeof SandboxCreateRequestSchema>;

export const SandboxSchema = Type.Object(
  {
    id: Type.String({ pattern: SANDBOX_ID_PATTERN }),
    template: Type.String(),
    backend: BackendKindSchema,
    state: Type.Union([Type.Literal('running'), Type.Literal('paused'), Type.Literal('ended'), Type.Literal('error')], {
      description:
        'running; paused (it holds nothing on the host: resume brings it back under the same id); ended (killed, its timeout); error: it stopped answering (its agent or its runtime died or went silent), ended and reclaimed, `ended_reason` says why.',
    }),
    started_at: Type.String({ format: 'date-time' }),
    end_at: Type.String({ format: 'date-time', description: 'When its timeout kills it (or when it ended).' }),
    metadata: Metadata,
    cpu_count: Type.Number({ description: 'Cores its processes may use together.' }),
    memory_mb: Type.Integer(),
    disk_size_mb: Type.Integer({ description: 'Its writable home directory.' }),
    internet_access: Type.Boolean({ description: 'Whether its processes reach the internet.' }),
    agent_version: Type.Union([Type.String(), Type.Null()]),
    envd_access_token: Type.Optional(Type.String({ description: 'Present for a secure sandbox, to its creator only.' })),
    ended_reason: Type.Optional(Type.String()),
    on_timeout: Type.Optional(Type.Union([Type.Literal('kill'), Type.Literal('pause')])),
    on_timeout_keep_memory: Type.Optional(Type.Boolean()),
    auto_resume: Type.Optional(Type.Boolean({ description: 'Whether, once paused, a request for it resumes it.' })),
    paused_at: Type.Optional(Type.String({ format: 'date-time' })),
    kept: Type.Optional(PauseKindSchema),
    api_key: Type.Optional(
      Type.String({ description: 'The name of the API key that made it (service.apiKeys); absent: the service token. Only that key and the service token see it.' }),
    ),
    volume_mounts: Type.Optional(Type.Array(VolumeMountSchema, { description: 'The volumes it mounts, by id.' })),
  },
  { $id: 'Sandbox', additionalProperties: false, title: 'A sandbox' },
);
export type Sandbox = Static<typeof SandboxSchema>;

export const SandboxTimeoutRequestSchema = Type.Object(
  { timeout_seconds: Type.Integer({ minimum: 0, description: 'From now; 0 kills the sandbox now.' }) },
  { $id: 'SandboxTimeoutRequest', additionalProperties: false },
);
export type SandboxTimeoutRequest = Static<typeof SandboxTimeoutRequestSchema>;

export const SandboxPauseRequestSchema = Type.Object(
  {
    keep_memory: Type.Optional(
      Type.Boolean({
        description:
          "true: keep its processes and their memory, refused (sandbox.pause_unsupported) where its backend keeps files only; false: its files only; omitted: the most its backend keeps (see /v1/backends' capabilities.pause).",
      }),
    ),
  },
  { $id: 'SandboxPauseRequest', additionalProperties: false },
);
export type SandboxPauseRequest = Static<typeof SandboxPauseRequestSchema>;

export const SandboxResumeRequestSchema = Type.Object(
  { timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, description: 'Its timeout from now once resumed (default: the server default, 300).' })) },
  { $id: 'SandboxResumeRequest', additionalProperties: false },
);
export type SandboxResumeRequest = Static<typeof SandboxResumeRequestSchema>;

export const SandboxForkRequestSchema = Type.Object(
  {
    count: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'Copies to make (default 1), each its own sandbox.' })),
    timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, description: 'Each copy’s timeout (default: the server default, 300).' })),
  },
  { $id: 'SandboxForkRequest', additionalProperties: false },
);
export type SandboxForkRequest = Static<typeof SandboxForkRequestSchema>;

/** One copy: the sandbox made, or why it could not be; the others are made or not on their own. */
export const SandboxForkSchema = Type.Object(
  {
    sandbox: Type.Optional(SandboxSchema),
    error: Type.Optional(Type.Object({ code: Type.String(), message: Type.String() })),
  },
  { $id: 'SandboxFork', additionalProperties: false },
);
export type SandboxFork = Static<typeof SandboxForkSchema>;

export const SandboxForkResultSchema = Type.Object({ kept: PauseKindSchema, forks: Type.Array(SandboxForkSchema) }, { $id: 'SandboxForkResult', additionalProperties: false });
export type SandboxForkResult = Static<typeof SandboxForkResultSchema>;

export const SnapshotCreateRequestSchema = Type.Object(
  {
    name: Type.Optional(
      Type.String({
        pattern: '^[a-z0-9][a-z0-9._-]{0,63}$',
        description: 'A name to start sandboxes from it by (a template name); a later snapshot of the same name replaces it.',
      }),
    ),
  },
  { $id: 'SnapshotCreateRequest', additionalProperties: false },
);
export type SnapshotCreateRequest = Static<typeof SnapshotCreateRequestSchema>;

/** A sandbox's state kept under the state dir: a template (`template` of a create, by id or name) until deleted. */
export const SnapshotSchema = Type.Object(
  {
    id: Type.String({ pattern: SANDBOX_ID_PATTERN }),
    name: Type.Union([Type.String(), Type.Null()]),
    sandbox_id: Type.String({ description: 'The sandbox it was taken of.' }),
    template: Type.String({ description: 'The template that sandbox started from.' }),
    backend: BackendKindSchema,
    kept: PauseKindSchema,
    bytes: Type.Integer({ description: 'Disk it takes.' }),
    created_at: Type.String({ format: 'date-time' }),
    api_key: Type.Optional(Type.String({ description: 'The API key whose sandbox it was taken of; only that key and the service token see it.' })),
  },
  { $id: 'Snapshot', additionalProperties: false },
);
export type Snapshot = Static<typeof SnapshotSchema>;

export const SnapshotListSchema = Type.Object({ snapshots: Type.Array(SnapshotSchema) }, { $id: 'SnapshotList', additionalProperties: false });

export const SandboxListSchema = Type.Object({ sandboxes: Type.Array(SandboxSchema) }, { $id: 'SandboxList', additionalProperties: false });

const ExecCommon = {
  envs: Type.Optional(EnvVarsSchema({ valueLength: 32768, description: 'Added to the sandbox’s environment for this command.' })),
  cwd: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: 'Where it runs: absolute, or relative to /home/user (the default).' })),
  user: Type.Optional(AgentUserSchema),
  stdin: Type.Optional(Type.String({ maxLength: 4 * 1024 * 1024, description: 'Its standard input; end of file at once when omitted.' })),
  timeout: Type.Optional(
    Type.Number({ exclusiveMinimum: 0, description: 'Seconds it may run (default: the snippet default; at most the snippet ceiling); past it its whole process tree is killed.' }),
  ),
};

export const SandboxArgvExecSchema = Type.Object(
  {
    argv: Type.Array(Type.String({ maxLength: 64 * 1024 }), { minItems: 1, maxItems: 4096, description: 'The program and its arguments, run as they are (no shell).' }),
    ...ExecCommon,
  },
  { additionalProperties: false },
);

export const SandboxShellExecSchema = Type.Object(
  { cmd: Type.String({ minLength: 1, maxLength: 1024 * 1024, description: 'A command line, run by a login shell: /bin/bash -l -c cmd.' }), ...ExecCommon },
  { additionalProperties: false },
);

export const SandboxExecRequestSchema = Type.Union([SandboxArgvExecSchema, SandboxShellExecSchema], {
  $id: 'SandboxExecRequest',
  title: 'A command run to its end in a sandbox',
});
export type SandboxExecRequest = Static<typeof SandboxExecRequestSchema>;

export const SandboxExecResultSchema = Type.Object(
  {
    sandbox_id: Type.String({ pattern: SANDBOX_ID_PATTERN }),
    stdout: Type.String({ description: 'Up to the server’s output cap, with a note when it was cut.' }),
    stderr: Type.String(),
    exit_code: Type.Integer({
      description: 'Its own status; 128 + n when signal n ended it; 124 when it ran past its timeout; 126 when it may not be run; 127 when it was not found.',
    }),
    timed_out: Type.Boolean({ description: 'It ran past its timeout: its whole process tree was killed.' }),
    duration_ms: Type.Integer({ minimum: 0 }),
  },
  { $id: 'SandboxExecResult', additionalProperties: false, title: 'What a command in a sandbox did' },
);
export type SandboxExecResult = Static<typeof SandboxExecResultSchema>;

export const SandboxRunCodeRequestSchema = Type.Object(
  {
    code: Type.String({ maxLength: 4 * 1024 * 1024, description: 'A cell for the sandbox’s code interpreter: names, imports and files persist in its context.' }),
    language: Type.Optional(Type.String({ maxLength: 32, description: 'Its language’s default context (python when neither this nor context_id is given).' })),
    context_id: Type.Optional(Type.String({ maxLength: 64, description: 'A context made on port 49999 (E2B’s createCodeContext).' })),
    env_vars: Type.Optional(ExecCommon.envs),
    timeout: Type.Optional(
      Type.Number({
        exclusiveMinimum: 0,
        description: 'Seconds the cell may run (default: the snippet default; at most the snippet ceiling); past it it is interrupted and the context kept.',
      }),
    ),
  },
  { $id: 'SandboxRunCodeRequest', additionalProperties: false, title: 'A cell run in a sandbox’s code interpreter' },
);
export type SandboxRunCodeRequest = Static<typeof SandboxRunCodeRequestSchema>;

/** A result of a cell (its last expression, or a display()), in every format it came in: E2B's fields. */
export const SandboxCodeResultSchema = Type.Object(
  {
    is_main_result: Type.Boolean({ description: 'The cell’s last expression (false: a display() or a figure shown).' }),
    text: Type.Optional(Type.String()),
    html: Type.Optional(Type.String()),
    markdown: Type.Optional(Type.String()),
    png: Type.Optional(Type.String({ contentEncoding: 'base64' })),
    svg: Type.Optional(Type.String()),
    jpeg: Type.Optional(Type.String({ contentEncoding: 'base64' })),
    pdf: Type.Optional(Type.String({ contentEncoding: 'base64' })),
    latex: Type.Optional(Type.String()),
    json: Type.Optional(Type.Unknown()),
    javascript: Type.Optional(Type.String()),
    data: Type.Optional(Type.Unknown({ description: 'A DataFrame’s columns.' })),
    chart: Type.Optional(Type.Unknown({ description: 'A matplotlib figure as data: type (line, scatter, bar, pie, box_and_whisker, superchart), title, axes, elements.' })),
    extra: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { $id: 'SandboxCodeResult', additionalProperties: false },
);
export type SandboxCodeResult = Static<typeof SandboxCodeResultSchema>;

export const SandboxRunCodeResultSchema = Type.Object(
  {
    sandbox_id: Type.String({ pattern: SANDBOX_ID_PATTERN }),
    stdout: Type.String({ description: 'Up to the server’s output cap, with a note when it was cut.' }),
    stderr: Type.String(),
    results: Type.Array(SandboxCodeResultSchema, { description: 'In the order they came; past the server’s cap on their size the rest are left out, said in stderr.' }),
    error: Type.Union([Type.Object({ name: Type.String(), value: Type.String(), traceback: Type.String() }, { additionalProperties: false }), Type.Null()], {
      description: 'The exception the cell raised; null when it ran through.',
    }),
    execution_count: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
    timed_out: Type.Boolean({ description: 'It ran past its timeout and was interrupted; the context keeps its state.' }),
    duration_ms: Type.Integer({ minimum: 0 }),
  },
  { $id: 'SandboxRunCodeResult', additionalProperties: false, title: 'What a cell did' },
);
export type SandboxRunCodeResult = Static<typeof SandboxRunCodeResultSchema>;

export const SandboxFileWrittenSchema = Type.Object(
  { path: Type.String({ description: 'Absolute, as the sandbox sees it.' }), bytes: Type.Integer({ minimum: 0 }) },
  { $id: 'SandboxFileWritten', additionalProperties: false },
);
export type SandboxFileWritten = Static<typeof SandboxFileWrittenSchema>;

/** What a sandbox's processes use now: from its cgroup and its home's file system, null where the backend cannot say. */
export const SandboxMetricsSchema = Type.Object(
  {
    timestamp: Type.String({ format: 'date-time' }),
    cpu_count: Type.Number(),
    cpu_used_pct: Type.Union([Type.Number(), Type.Null()], { description: 'Of `cpu_count` cores, since the previous reading (or the start).' }),
    mem_used_bytes: Type.Union([Type.Integer(), Type.Null()]),
    mem_total_bytes: Type.Integer(),
    disk_used_bytes: Type.Union([Type.Integer(), Type.Null()]),
    disk_total_bytes: Type.Union([Type.Integer(), Type.Null()]),
  },
  { $id: 'SandboxMetrics', additionalProperties: false },
);
export type SandboxMetrics = Static<typeof SandboxMetricsSchema>;
