import type { Command } from 'commander';
import { statusResponse } from '../job-status.js';
import { loadJob } from '../job-view.js';
import { addRootOption, rootOf, type RootFlags } from '../options.js';
import { respond } from '../respond.js';

export function registerStatus(program: Command): void {
  addRootOption(program.command('status').description("a job's state, exit code, times, command and log sizes").argument('<id>', 'job id, or an unambiguous prefix of one')).action(
    respond(async (query: string, flags: RootFlags) => statusResponse(await loadJob(rootOf(flags), query))),
  );
}
