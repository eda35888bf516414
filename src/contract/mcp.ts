import { Type, type Static } from '@sinclair/typebox';
import { ErrorSchema } from './run-job.js';
import { RuntimeListSchema } from './runtimes.js';
import { SandboxSchema } from './sandbox.js';

/**
 * The shapes the MCP face adds around the contracts. MCP gives a tool's structured result as a
 * JSON object, so a list travels in a field; and a refused call (isError) still carries our
 * stable error, as every other face does.
 */

export const McpToolErrorSchema = Type.Object(
  { error: ErrorSchema },
  {
    $id: 'McpToolError',
    additionalProperties: false,
    description: 'A call the server refused (isError: true): the stable code, what to fix, and details.field when one field is at fault.',
  },
);
export type McpToolError = Static<typeof McpToolErrorSchema>;

export const ListRuntimesInputSchema = Type.Object({}, { $id: 'ListRuntimesInput', additionalProperties: false });

export const ListRuntimesResultSchema = Type.Object(
  { runtimes: RuntimeListSchema },
  { $id: 'ListRuntimesResult', additionalProperties: false, title: 'Runtimes', description: 'The languages snippets can use here, with their versions and aliases.' },
);
export type ListRuntimesResult = Static<typeof ListRuntimesResultSchema>;

export const SandboxListResultSchema = Type.Object(
  { sandboxes: Type.Array(SandboxSchema) },
  { $id: 'SandboxListResult', additionalProperties: false, title: 'Sandboxes', description: 'The sandboxes this server made, running and recently ended.' },
);

/** How a file's bytes travel in a tool's JSON: text as it is, anything else as base64. */
export const FileEncodingSchema = Type.Union([Type.Literal('utf8'), Type.Literal('base64')], {
  description: 'utf8 (default): the content is the text; base64: the content is the bytes in base64 (binary files).',
});

export const SandboxFileContentSchema = Type.Object(
  {
    path: Type.String(),
    encoding: FileEncodingSchema,
    content: Type.String(),
    bytes: Type.Integer({ minimum: 0 }),
  },
  { $id: 'SandboxFileContent', additionalProperties: false, title: 'A file of a sandbox' },
);
export type SandboxFileContent = Static<typeof SandboxFileContentSchema>;
