import { Type, type Static } from '@sinclair/typebox';
import { ErrorSchema } from './run-job.js';
import { RuntimeListSchema } from './runtimes.js';

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
