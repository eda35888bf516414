import type { Command } from 'commander';
import type { RunnerConfig } from '../../config/schema.js';
import { printJson } from '../../util/stdio.js';
import { commandConfig } from '../command-config.js';
import { positiveOption } from '../flag-values.js';

export function registerConfig(program: Command): void {
  program
    .command('config')
    .description('print the effective configuration as JSON: defaults < --config file < AGENT_RUNNER_* variables < flags')
    .option('--state-dir <dir>', 'compile cache, toolchain mirrors, job staging')
    .option('--concurrency <n>', 'jobs running at once')
    .action(async (flags: { stateDir?: string; concurrency?: string }, command: Command) => {
      const config = await commandConfig(command, {
        stateDir: flags.stateDir,
        concurrency: positiveOption('--concurrency', flags.concurrency, { integer: true }),
      });
      printJson(masked(config));
    });
}

/** The output is meant to be pasted into issues and logs: secrets stay out. */
function masked(config: RunnerConfig): RunnerConfig {
  return { ...config, service: { ...config.service, token: config.service.token === null ? null : '***' } };
}
