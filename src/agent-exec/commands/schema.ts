import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { AGENT_EXEC_SCHEMA_RELEASE } from '../../contract/agent-exec-version.js';
import { respond } from '../respond.js';
import { success } from '../responses.js';

/**
 * The schema file shipped with the package (in its `files`), generated from the contract at
 * build time: read rather than rebuilt here, since that would load TypeBox into the CLI.
 */
const SCHEMA_URL = new URL('../../../schemas/agent-exec-response.schema.json', import.meta.url);

export function registerSchema(program: Command): void {
  program
    .command('schema')
    .description('print the JSON Schema of every agent-exec response')
    .action(
      respond(async () =>
        success('schema', {
          schema_format: 'json-schema-draft-07',
          schema: JSON.parse(await readFile(SCHEMA_URL, 'utf8')) as Record<string, unknown>,
          generated_at: AGENT_EXEC_SCHEMA_RELEASE.updated_at,
        }),
      ),
    );
}
