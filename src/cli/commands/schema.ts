import type { Command } from 'commander';
import { CONTRACT_SCHEMA_NAMES } from '../../contract/schema-names.js';
import { exitAfterFlush, printJson } from '../../util/stdio.js';

export function registerSchema(program: Command): void {
  program
    .command('schema')
    .description(`print the JSON Schema of a contract shape: ${CONTRACT_SCHEMA_NAMES.join(', ')}`)
    .argument('<name>', 'which shape')
    .action(async (name: string) => {
      const { CONTRACT_SCHEMAS, jsonSchemaOf } = await import('../../contract/catalog.js');
      const schema = CONTRACT_SCHEMAS[name];
      if (!schema) throw new Error(`unknown schema ${JSON.stringify(name)}: expected one of ${Object.keys(CONTRACT_SCHEMAS).join(', ')}`);
      printJson(jsonSchemaOf(schema));
      exitAfterFlush(0);
    });
}
