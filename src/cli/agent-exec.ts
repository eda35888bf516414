#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { exitAfterFlush, printJson } from './io.js';

/** The response schema shipped with the package: the contract every stdout response keeps. */
const SCHEMA_URL = new URL('../../schemas/agent-exec-response.schema.json', import.meta.url);

const program = new Command('agent-exec')
  .description('Background jobs for agents; every stdout response is one JSON object valid against `agent-exec schema`.')
  .showHelpAfterError();

program
  .command('schema')
  .description('print the JSON Schema of every agent-exec response')
  .action(() => {
    const schema = JSON.parse(readFileSync(SCHEMA_URL, 'utf8')) as { $comment?: string };
    printJson({
      schema_version: '0.1',
      ok: true,
      type: 'schema',
      schema_format: 'json-schema-draft-07',
      schema,
      // The schema records when it last changed in its $comment.
      generated_at: schema.$comment ?? new Date(0).toISOString(),
    });
    exitAfterFlush(0);
  });

program.parseAsync().catch((error: Error) => {
  printJson({ schema_version: '0.1', ok: false, type: 'error', error: { code: 'internal_error', message: error.message, retryable: false } });
  exitAfterFlush(1);
});
