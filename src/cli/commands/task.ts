import type { Command } from 'commander';
import { backendOption, withBackend } from '../backend-option.js';
import { withCommandRuntime } from '../command-config.js';
import { cancelOnInterrupt } from '../interrupts.js';
import { exitAfterFlush, printJson } from '../../util/stdio.js';
import { readRequestJson } from '../request-input.js';

export function registerTask(program: Command): void {
  program
    .command('task')
    .description('run one code task (items in, items out, captured prints) and print its response')
    .option('-r, --request <file>', 'read the task request from a file ("-" or omitted: stdin)')
    .addOption(backendOption())
    .addHelpText('after', '\nExit status: 0 when the task returned a result, 1 when it answered with an error.')
    .action(async (flags: { request?: string; backend?: string }, command: Command) => {
      const { runTask } = await import('../../tasks/run-task.js');
      const request = withBackend(await readRequestJson(flags.request), flags.backend);
      const response = await withCommandRuntime(command, (runtime) => cancelOnInterrupt((signal) => runTask(request, { runtime, signal })));
      printJson(response);
      exitAfterFlush('result' in response ? 0 : 1);
    });
}
