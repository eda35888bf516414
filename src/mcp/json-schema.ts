import type { TSchema } from '@sinclair/typebox';
import { jsonSchemaOf } from '../contract/catalog.js';
import { McpToolErrorSchema } from '../contract/mcp.js';

/**
 * A contract schema as a tool's inputSchema: plain JSON, draft-07 declared, and no `$id` at any
 * depth. The client compiles every tool's schemas into one validator, where two tools naming
 * the same nested schema (Runtime, say) would clash. No contract field is itself named `$id`.
 */
export function toolInputSchema(schema: TSchema): Record<string, unknown> {
  return withoutIds(jsonSchemaOf(schema));
}

/**
 * A tool's outputSchema: its result, or the refusal. The SDK's client checks structuredContent
 * against the outputSchema even when isError is set, so the schema names both shapes; MCP wants
 * `type: object` at the root, which both are.
 */
export function toolOutputSchema(result: TSchema): Record<string, unknown> {
  const { $schema, ...shape } = toolInputSchema(result);
  const { $schema: _dialect, ...refusal } = toolInputSchema(McpToolErrorSchema);
  return { $schema, type: 'object', anyOf: [shape, refusal] };
}

function withoutIds(schema: Record<string, unknown>): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema), (key, value: unknown) => (key === '$id' ? undefined : value)) as Record<string, unknown>;
}
