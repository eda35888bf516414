import { Type, type Static } from '@sinclair/typebox';
import { UsageSchema } from './usage.js';
import { BackendChoiceSchema } from './backend.js';

const MiB = 1024 * 1024;

/**
 * The bounds the published request schema states. They are also the configuration's defaults
 * (config/schema.ts); a configuration may tighten them, and a run checks its own.
 */
export const TASK_BOUNDS = {
  /** Below this neither interpreter starts reliably. */
  minMemoryBytes: 64 * MiB,
  maxMemoryBytes: 8192 * MiB,
  defaultMaxResultBytes: 16 * MiB,
  maxResultBytesCeiling: 256 * MiB,
} as const;

/**
 * The code-task contract, defined once: the request, the two messages a task sends back over
 * its pipe (../shared/spec/task-pipe-result-protocol.md; the print frames streamed before the
 * message are the host's own business, tasks/result-channel.ts), and the response built from them.
 */

/** A plain string enum: validation errors then read `lang must be one of ["python","node"]`. */
function StringEnum<const T extends readonly string[]>(values: T, options: { description?: string } = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: values, ...options });
}

const JsonObject = Type.Record(Type.String(), Type.Unknown(), { description: 'A JSON object.' });

/**
 * Other fields (binary, ...) pass through untouched. In per_item mode each output item carries
 * `pairedItem: {item: <input index>}`.
 */
export const TaskItemSchema = Type.Object(
  { json: JsonObject, pairedItem: Type.Optional(Type.Unknown({ description: 'Which input item this one came from.' })) },
  { additionalProperties: true },
);
export type TaskItem = Static<typeof TaskItemSchema>;

export const TaskRequestSchema = Type.Object(
  {
    task_id: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'Echoed in the response; generated when missing.' })),
    lang: StringEnum(['python', 'node']),
    code: Type.String({ maxLength: 4 * 1024 * 1024, description: 'A function body: it ends with `return`. Python sees `_items` / `_item`, node `items` / `item`.' }),
    mode: StringEnum(['all_items', 'per_item'], {
      description: 'all_items: the code runs once over every item and returns a list. per_item: it runs once per item; None/undefined drops the item.',
    }),
    items: Type.Array(TaskItemSchema),
    timeout_ms: Type.Optional(Type.Integer({ minimum: 1, description: 'Wall-clock limit for the whole task. Default: the snippet default timeout.' })),
    backend: Type.Optional(BackendChoiceSchema),
    limits: Type.Optional(
      Type.Object(
        {
          memory_bytes: Type.Optional(
            Type.Integer({
              minimum: TASK_BOUNDS.minMemoryBytes,
              maximum: TASK_BOUNDS.maxMemoryBytes,
              description: 'Memory of the interpreter. Default: the snippet memory limit.',
            }),
          ),
          max_result_bytes: Type.Optional(
            Type.Integer({ minimum: 1, maximum: TASK_BOUNDS.maxResultBytesCeiling, description: `Size of the result as JSON. Default ${TASK_BOUNDS.defaultMaxResultBytes}.` }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { $id: 'TaskRequest', additionalProperties: false, title: 'Code task request' },
);
export type TaskRequest = Static<typeof TaskRequestSchema>;

/**
 * Each entry is one print() / console.log() call, each argument as python's repr() or node's
 * util.inspect() shows it (`print("Hello", 123)` gives `["'Hello'", "123"]`). The host keeps them
 * as they are made, so errors (a timeout included) carry the calls made before.
 */
export const PrintArgsSchema = Type.Array(Type.Array(Type.String()));
export type PrintArgs = Static<typeof PrintArgsSchema>;

export const TaskErrorInfoSchema = Type.Object(
  {
    message: Type.String(),
    description: Type.String({
      description: 'The kind of error: the exception class (ZeroDivisionError, TypeError), SystemExit or process.exit; empty when the runner built the error.',
    }),
    stack: Type.String(),
    stderr: Type.String({ description: 'What the task wrote to stderr and stdout (user output never reaches the result pipe).' }),
  },
  { additionalProperties: false },
);
export type TaskErrorInfo = Static<typeof TaskErrorInfoSchema>;

export const PipeResultMessageSchema = Type.Object({ result: Type.Array(TaskItemSchema), print_args: PrintArgsSchema }, { additionalProperties: false });
export const PipeErrorMessageSchema = Type.Object({ error: TaskErrorInfoSchema, print_args: PrintArgsSchema }, { additionalProperties: false });
export type PipeResultMessage = Static<typeof PipeResultMessageSchema>;
export type PipeErrorMessage = Static<typeof PipeErrorMessageSchema>;
export type PipeMessage = PipeResultMessage | PipeErrorMessage;

/** Why a task has no result, for clients that branch on it (HTTP status, CLI exit code). */
export const TASK_ERROR_CODES = {
  'validation.invalid_request': 'the request does not match the schema or exceeds a ceiling; the message names the field',
  'task.failed': 'the task reported an error: an exception, an exit, a return value that is not items, a result over max_result_bytes',
  'task.crashed': 'the interpreter ended without sending a message (killed by a signal, or exited), or did not exit 0 after sending it',
  'task.protocol_error':
    'the task sent something other than exactly one well-formed message after its prints, or a message the harness could not have sent (print_args other than the prints it made, per_item pairings out of order or range)',
  'run.timed_out': 'the task ran past timeout_ms and was killed',
  'run.out_of_memory': 'the task was killed by the memory limit',
  'run.canceled': 'the caller aborted the task',
  'backend.unavailable': 'no sandbox, or no interpreter for the language, on this host',
  'internal.error': 'an unexpected failure in the runner itself',
} as const;

export const TaskErrorCodeSchema = StringEnum(Object.keys(TASK_ERROR_CODES) as Array<keyof typeof TASK_ERROR_CODES>, {
  description: Object.entries(TASK_ERROR_CODES)
    .map(([code, meaning]) => `${code}: ${meaning}`)
    .join('; '),
});
export type TaskErrorCode = Static<typeof TaskErrorCodeSchema>;

const TaskId = Type.String({ description: 'The request task_id, or a generated one.' });

/** Present once the task's interpreter ran. */
const TaskUsage = Type.Optional(UsageSchema);

export const TaskResultResponseSchema = Type.Object({ task_id: TaskId, ...PipeResultMessageSchema.properties, usage: TaskUsage }, { additionalProperties: false });
export const TaskErrorResponseSchema = Type.Object(
  { task_id: TaskId, error_code: TaskErrorCodeSchema, ...PipeErrorMessageSchema.properties, usage: TaskUsage },
  { additionalProperties: false },
);
export const TaskResponseSchema = Type.Union([TaskResultResponseSchema, TaskErrorResponseSchema], { $id: 'TaskResponse', title: 'Code task response' });
export type TaskResultResponse = Static<typeof TaskResultResponseSchema>;
export type TaskErrorResponse = Static<typeof TaskErrorResponseSchema>;
export type TaskResponse = Static<typeof TaskResponseSchema>;
