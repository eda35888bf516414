import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { respond } from '../respond.js';
import { success } from '../responses.js';

/** The response schema shipped with the package: the contract every stdout response keeps. */
const SCHEMA_URL = new URL('../../../schemas/agent-exec-response.schema.json', import.meta.url);

export function registerSchema(program: Command): void {
  program
    .command('schema')
    .description('print the JSON Schema of every agent-exec response')
    .action(
      respond(async () => {
        const schema = JSON.parse(await readFile(SCHEMA_URL, 'utf8')) as { $comment?: string };
        return success('schema', {
          schema_format: 'json-schema-draft-07',
          schema,
          // The schema records when it last changed in its $comment.
          generated_at: schema.$comment ?? new Date(0).toISOString(),
        });
      }),
    );
}
