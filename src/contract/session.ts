import { Type, type Static } from '@sinclair/typebox';
import { BackendChoiceSchema, BackendKindSchema } from './backend.js';
import { CommandRuleSchema, NetworkPolicySchema } from './run-job.js';
import { SandboxCodeResultSchema } from './sandbox.js';

/**
 * Sessions: a sandbox that lives across calls, with a work dir and, for python and node, a
 * live interpreter whose names persist between cells. Defined once here for the HTTP routes,
 * the typed client, the CLI and the MCP tools.
 */

export const SESSION_ID_PATTERN = '^ses_[0-9a-f]{32}$';

export const SessionCreateRequestSchema = Type.Object(
  {
    lang: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description: 'python or node (with their aliases): the live interpreter cells run in. Omitted: a session for commands and files only.',
      }),
    ),
    backend: Type.Optional(BackendChoiceSchema),
    limits: Type.Optional(
      Type.Object(
        {
          memory_bytes: Type.Optional(Type.Integer({ minimum: 16 << 20, description: 'Memory of the whole session, at most the server’s ceiling.' })),
          max_processes: Type.Optional(Type.Integer({ minimum: 1, description: 'Processes and threads of the whole session.' })),
        },
        { additionalProperties: false },
      ),
    ),
    network: Type.Optional(NetworkPolicySchema),
    policy: Type.Optional(
      Type.Object(
        {
          allowed_commands: Type.Optional(
            Type.Array(CommandRuleSchema, { description: 'Commands `argv` requests may run, as in a run job (pinned path/sha256 rules are not taken by sessions).' }),
          ),
          allow_shell: Type.Optional(
            Type.Boolean({
              description:
                'Whether `argv` may run a shell or inline interpreter code. Default: true with `lang` (cells are inline code), false without; false with `lang` is refused.',
            }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    idle_timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, description: 'The session ends after this long without a request (default and ceiling: the server’s).' })),
  },
  { $id: 'SessionCreateRequest', additionalProperties: false, title: 'Create a session' },
);
export type SessionCreateRequest = Static<typeof SessionCreateRequestSchema>;

export const SessionSchema = Type.Object(
  {
    id: Type.String({ pattern: SESSION_ID_PATTERN }),
    lang: Type.Union([Type.String(), Type.Null()], { description: 'The interpreter cells run in; null: commands and files only.' }),
    version: Type.Union([Type.String(), Type.Null()], { description: 'The interpreter’s version.' }),
    backend: BackendKindSchema,
    state: Type.Union([Type.Literal('running'), Type.Literal('ended')]),
    created_at: Type.String({ format: 'date-time' }),
    last_used_at: Type.String({ format: 'date-time' }),
    idle_timeout_seconds: Type.Integer({ minimum: 1 }),
    expires_at: Type.String({ format: 'date-time', description: 'When the session ends at the latest (its lifetime ceiling).' }),
    work_dir: Type.String({ description: 'The work dir as cells and commands see it (their cwd).' }),
    ended_reason: Type.Optional(Type.String({ description: 'Why it ended: deleted, idle, lifetime, a cell that did not stop, the interpreter exited.' })),
    api_key: Type.Optional(
      Type.String({ description: 'The name of the API key that made it (service.apiKeys); absent: the service token. Only that key and the service token see it.' }),
    ),
  },
  { $id: 'Session', additionalProperties: false, title: 'A session' },
);
export type Session = Static<typeof SessionSchema>;

export const SessionListSchema = Type.Object({ sessions: Type.Array(SessionSchema) }, { $id: 'SessionList', additionalProperties: false });

const ExecCommon = {
  timeout: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'Seconds the cell or command may run (default: the snippet default; at most the snippet ceiling).' })),
};

export const SessionCellSchema = Type.Object(
  {
    code: Type.String({ maxLength: 4 * 1024 * 1024, description: 'A cell, run in the session’s interpreter: names, imports and files persist.' }),
    lang: Type.Optional(Type.String({ maxLength: 64, description: 'Must be the session’s language when given.' })),
    ...ExecCommon,
  },
  { additionalProperties: false },
);

export const SessionCommandSchema = Type.Object(
  {
    argv: Type.Array(Type.String({ maxLength: 64 * 1024 }), { minItems: 1, maxItems: 4096, description: 'A command run in the work dir, under the session’s policy.' }),
    stdin: Type.Optional(Type.String({ maxLength: 4 * 1024 * 1024 })),
    ...ExecCommon,
  },
  { additionalProperties: false },
);

export const SessionExecRequestSchema = Type.Union([SessionCellSchema, SessionCommandSchema], { $id: 'SessionExecRequest', title: 'A cell or a command in a session' });
export type SessionExecRequest = Static<typeof SessionExecRequestSchema>;

export const SessionExecResultSchema = Type.Object(
  {
    session_id: Type.String({ pattern: SESSION_ID_PATTERN }),
    stdout: Type.String(),
    stderr: Type.String(),
    exit_code: Type.Integer({ description: '0; 1 for an exception in a cell; a command’s own status; 124 when it ran past its timeout; 127 for a command not found.' }),
    error: Type.Union([Type.String(), Type.Null()], {
      description: 'The exception a cell raised (`ZeroDivisionError: division by zero`), or why the session ended; null otherwise.',
    }),
    value: Type.Union([Type.String(), Type.Null()], { description: 'A cell’s last expression, as text (repr, util.inspect); null when it has none.' }),
    results: Type.Array(SandboxCodeResultSchema, {
      description:
        'What a python cell showed, in order, each in every format it came in: its last expression, display() calls, matplotlib figures (png, with a `chart` of their data), DataFrames (html, text). Empty for commands; past the server’s cap on their size the rest are left out, said in stderr.',
    }),
    timed_out: Type.Boolean({ description: 'It ran past its timeout: a cell was interrupted (the session stays), a command killed with its process group.' }),
    session_ended: Type.Boolean({ description: 'The session is gone after this: a cell that did not stop at its timeout, or an interpreter that exited.' }),
    duration_ms: Type.Integer({ minimum: 0 }),
  },
  { $id: 'SessionExecResult', additionalProperties: false, title: 'What a cell or command did' },
);
export type SessionExecResult = Static<typeof SessionExecResultSchema>;

export const SessionFileWrittenSchema = Type.Object(
  { path: Type.String(), bytes: Type.Integer({ minimum: 0 }), sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }) },
  { $id: 'SessionFileWritten', additionalProperties: false },
);
export type SessionFileWritten = Static<typeof SessionFileWrittenSchema>;
