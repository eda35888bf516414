#!/usr/bin/env node
// Writes the JSON Schemas shipped in schemas/ from their TypeBox definitions, as compiled by
// tsc into dist/ (`npm run build` runs it after tsc). The text depends on nothing but the
// definitions: keys in the order the definitions give them, no dates but the schema's own.
// Usage: node scripts/generate-schemas.mjs [root]   (root: where schemas/ goes; the package's by default)
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AGENT_EXEC_RESPONSE_SCHEMA } from '../dist/contract/agent-exec.js';

const SCHEMAS = { 'agent-exec-response.schema.json': AGENT_EXEC_RESPONSE_SCHEMA };

const dir = join(process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url)), 'schemas');
mkdirSync(dir, { recursive: true });
for (const [name, schema] of Object.entries(SCHEMAS)) writeFileSync(join(dir, name), `${JSON.stringify(schema, null, 2)}\n`);
