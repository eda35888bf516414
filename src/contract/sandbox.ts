import { Type, type Static } from '@sinclair/typebox';
import { BackendChoiceSchema, BackendKindSchema } from './backend.js';

/**
 * Long-lived sandboxes: a sandbox that runs until it is killed or its timeout passes, with
 * processes (pipes or a terminal), files and watches served by an agent inside it. The E2B face
 * (E2B's control plane and envd) and `/v1/sandboxes` are two views of these; this is ours,
 * defined once for the HTTP routes, the typed client, the CLI and the MCP tools.
 */

/** Lower-case letters and digits only, so that `{port}-{id}.{domain}` is a host name. */
export const SANDBOX_ID_PATTERN = '^[0-9a-z]{24}$';

const Metadata = Type.Record(Type.String({ maxLength: 256 }), Type.String({ maxLength: 4096 }), { description: 'Labels kept with the sandbox, for listing by filter.' });
const EnvVars = Type.Record(Type.String({ minLength: 1, maxLength: 256, pattern: '^[^=\\0]+$' }), Type.String({ maxLength: 32768 }), {
  description: 'Environment of every process the sandbox runs (a process may add its own).',
});

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
  },
  { $id: 'SandboxCreateRequest', additionalProperties: false, title: 'Create a sandbox' },
);
export type SandboxCreateRequest = Static<typeof SandboxCreateRequestSchema>;

export const SandboxSchema = Type.Object(
  {
    id: Type.String({ pattern: SANDBOX_ID_PATTERN }),
    template: Type.String(),
    backend: BackendKindSchema,
    state: Type.Union([Type.Literal('running'), Type.Literal('ended')]),
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
  },
  { $id: 'Sandbox', additionalProperties: false, title: 'A sandbox' },
);
export type Sandbox = Static<typeof SandboxSchema>;

export const SandboxTimeoutRequestSchema = Type.Object(
  { timeout_seconds: Type.Integer({ minimum: 0, description: 'From now; 0 kills the sandbox now.' }) },
  { $id: 'SandboxTimeoutRequest', additionalProperties: false },
);
export type SandboxTimeoutRequest = Static<typeof SandboxTimeoutRequestSchema>;

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
