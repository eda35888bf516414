import type { Command } from 'commander';
import { exitAfterFlush, printJson } from '../../util/stdio.js';
import { withCommandRuntime } from '../command-config.js';

export function registerBackends(program: Command): void {
  program
    .command('backends')
    .description('print the sandbox backends as a JSON array: kind, whether it is available here and why, capabilities')
    .action(async (_flags: object, command: Command) => {
      printJson(await withCommandRuntime(command, (runtime) => runtime.backends.describe()));
      exitAfterFlush(0);
    });
}
