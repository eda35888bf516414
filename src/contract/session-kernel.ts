import { Type, type Static } from '@sinclair/typebox';

/**
 * What the host and a session's kernel (languages/session-python.py, session-node.cjs) say to
 * each other, framed as everywhere else (wire/frame-codec.ts) on the kernel's stdin and stdout.
 * The kernel runs the job's own code, which can write to the same pipe: the host validates
 * every message against these schemas and trusts none of it beyond its shape.
 */

export const KernelReadySchema = Type.Object({ ready: Type.Literal(true), version: Type.String({ maxLength: 64 }) });

const Text = Type.String();
const Count = Type.Integer({ minimum: 0 });

/**
 * A cell's or command's outcome. Each text field is at most the request's `output_bytes` of
 * UTF-8, cut by the kernel, which says how long it was in `*_bytes` (value and error: only when
 * cut). The host cuts again whatever the kernel says: a cell can write a reply of its own.
 */
export const KernelRunReplySchema = Type.Object({
  id: Type.Integer(),
  status: Type.Union([Type.Literal('ok'), Type.Literal('error'), Type.Literal('timed_out')]),
  exit_code: Type.Integer(),
  error: Type.Union([Text, Type.Null()]),
  value: Type.Union([Text, Type.Null()]),
  stdout: Text,
  stderr: Text,
  stdout_bytes: Count,
  stderr_bytes: Count,
  value_bytes: Type.Optional(Count),
  error_bytes: Type.Optional(Count),
});
export type KernelRunReply = Static<typeof KernelRunReplySchema>;

export const KernelFileReplySchema = Type.Union([
  Type.Object({ id: Type.Integer(), bytes: Count }),
  Type.Object({ id: Type.Integer(), data: Type.String({ contentEncoding: 'base64' }) }),
  Type.Object({
    id: Type.Integer(),
    error: Type.Object({ code: Type.Union([Type.Literal('not_found'), Type.Literal('not_a_file'), Type.Literal('too_large'), Type.Literal('os_error')]), message: Text }),
  }),
]);
export type KernelFileReply = Static<typeof KernelFileReplySchema>;

export type KernelRequest =
  | { op: 'cell'; code: string; timeout_ms: number; output_bytes: number }
  | { op: 'command'; argv: string[]; stdin?: string; timeout_ms: number; output_bytes: number }
  | { op: 'write'; path: string; data: string }
  | { op: 'read'; path: string; max_bytes: number };
