import type { Command } from 'commander';
import { exitAfterFlush, printJson } from '../../util/stdio.js';

export function registerBackends(program: Command): void {
  program
    .command('backends')
    .description('print the sandbox backends as a JSON array: kind, whether it is available here and why, capabilities')
    .action(async () => {
      const { RunnerRuntime } = await import('../../runner/runtime.js');
      const runtime = RunnerRuntime.shared();
      printJson(await runtime.backends.describe());
      await runtime.dispose();
      exitAfterFlush(0);
    });
}
