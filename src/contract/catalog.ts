import type { TSchema } from '@sinclair/typebox';
import { RunJobRequestSchema, RunJobResultSchema } from './run-job.js';
import type { ContractSchemaName } from './schema-names.js';
import { SnippetRequestSchema, SnippetResponseSchema } from './snippet.js';
import { TaskRequestSchema, TaskResponseSchema } from './task.js';

/** Every published shape by name: the CLI `schema` command and the OpenAPI document read this. */
export const CONTRACT_SCHEMAS: Readonly<Record<string, TSchema>> = {
  'run-request': RunJobRequestSchema,
  'run-result': RunJobResultSchema,
  'snippet-request': SnippetRequestSchema,
  'snippet-response': SnippetResponseSchema,
  'task-request': TaskRequestSchema,
  'task-response': TaskResponseSchema,
} satisfies Record<ContractSchemaName, TSchema>;

/** Plain JSON Schema (TypeBox's symbols dropped). */
export function jsonSchemaOf(schema: TSchema): Record<string, unknown> {
  return { $schema: 'http://json-schema.org/draft-07/schema#', ...(JSON.parse(JSON.stringify(schema)) as Record<string, unknown>) };
}
