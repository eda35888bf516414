import type { Command } from 'commander';
import { CONTRACT_SCHEMAS, jsonSchemaOf } from '../../contract/catalog.js';
import { exitAfterFlush, printJson } from '../../util/stdio.js';

export function registerSchema(program: Command): void {
  program
    .command('schema')
    .description(`print the JSON Schema of a contract shape: ${Object.keys(CONTRACT_SCHEMAS).join(', ')}`)
    .argument('<name>', 'which shape')
    .action((name: string) => {
      const schema = CONTRACT_SCHEMAS[name];
      if (!schema) throw new Error(`unknown schema ${JSON.stringify(name)}: expected one of ${Object.keys(CONTRACT_SCHEMAS).join(', ')}`);
      printJson(jsonSchemaOf(schema));
      exitAfterFlush(0);
    });
}
