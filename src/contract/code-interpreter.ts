import { Type, type Static } from '@sinclair/typebox';
import { EnvVarsSchema } from './checked-record.js';

/**
 * E2B's code interpreter (github:e2b-dev/code-interpreter, template/server/, as the
 * `@e2b/code-interpreter` SDK 2.x sends and reads it), served on port 49999 of a sandbox: the
 * shapes of its routes, and of the messages between the host and a context's kernel bridge
 * (src/interpreter/python/kernel-bridge.py). Field names are E2B's (snake_case here).
 */

/** The port E2B's SDK names for a sandbox's code interpreter. */
export const CODE_INTERPRETER_PORT = 49999;

const EnvVars = EnvVarsSchema({ valueLength: 32768 });

/** `POST /execute`: a cell, in a context (`context_id`) or the default context of a language (python when neither is given). */
export const ExecuteRequestSchema = Type.Object(
  {
    code: Type.String({ maxLength: 4 * 1024 * 1024 }),
    context_id: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
    language: Type.Optional(Type.Union([Type.String({ maxLength: 32 }), Type.Null()])),
    env_vars: Type.Optional(Type.Union([EnvVars, Type.Null()])),
    timeout: Type.Optional(
      Type.Union([
        Type.Number({ exclusiveMinimum: 0, description: 'Seconds; past them the cell is interrupted and the context kept (agent-runner: the SDK times out on its side).' }),
        Type.Null(),
      ]),
    ),
  },
  { $id: 'CodeInterpreterExecuteRequest', additionalProperties: true },
);
export type ExecuteRequest = Static<typeof ExecuteRequestSchema>;

/** `POST /contexts`. */
export const CreateContextRequestSchema = Type.Object(
  {
    language: Type.Optional(Type.Union([Type.String({ maxLength: 32 }), Type.Null()])),
    cwd: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 4096 }), Type.Null()])),
  },
  { $id: 'CodeInterpreterCreateContext', additionalProperties: true },
);
export type CreateContextRequest = Static<typeof CreateContextRequestSchema>;

export const ContextSchema = Type.Object({ id: Type.String(), language: Type.String(), cwd: Type.String() }, { $id: 'CodeInterpreterContext' });
export type Context = Static<typeof ContextSchema>;

const Text = Type.String();

/** One line of an execution's stream (NDJSON), as the bridge sends it and the SDK reads it. */
export const OutputLineSchema = Type.Union([
  Type.Object({ type: Type.Union([Type.Literal('stdout'), Type.Literal('stderr')]), text: Text, timestamp: Type.Optional(Type.String({ maxLength: 64 })) }),
  Type.Object(
    {
      type: Type.Literal('result'),
      is_main_result: Type.Boolean(),
      text: Type.Optional(Text),
      html: Type.Optional(Text),
      markdown: Type.Optional(Text),
      svg: Type.Optional(Text),
      png: Type.Optional(Text),
      jpeg: Type.Optional(Text),
      pdf: Type.Optional(Text),
      latex: Type.Optional(Text),
      json: Type.Optional(Type.Unknown()),
      javascript: Type.Optional(Text),
      data: Type.Optional(Type.Unknown()),
      chart: Type.Optional(Type.Unknown()),
      extra: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    },
    { additionalProperties: false },
  ),
  Type.Object({ type: Type.Literal('error'), name: Text, value: Text, traceback: Text }),
  Type.Object({ type: Type.Literal('number_of_executions'), execution_count: Type.Integer({ minimum: 0 }) }),
]);
export type OutputLine = Static<typeof OutputLineSchema>;

/** The bridge's first message: it serves, or its kernel did not start (why). */
export const BridgeReadySchema = Type.Union([
  Type.Object({ ready: Type.Literal(true), version: Type.String({ maxLength: 32 }), language: Type.String({ maxLength: 32 }) }),
  Type.Object({ ready: Type.Literal(false), error: Type.String({ maxLength: 65536 }) }),
]);

/** Every later message of the bridge: an output line of a running execute, its end, or the answer to another request. */
export const BridgeMessageSchema = Type.Union([
  Type.Object({ id: Type.Integer(), output: OutputLineSchema }),
  Type.Object({ id: Type.Integer(), done: Type.Literal(true) }),
  Type.Object({ id: Type.Integer(), error: Type.String({ maxLength: 65536 }) }),
  Type.Object({ id: Type.Integer() }, { additionalProperties: false }),
]);
export type BridgeMessage = Static<typeof BridgeMessageSchema>;

export type BridgeRequest = { op: 'execute'; code: string; env_vars: Record<string, string> } | { op: 'interrupt' } | { op: 'restart' };
