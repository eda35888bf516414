import type { Command } from 'commander';
import { outcomeFields } from '../job-fields.js';
import { isSettled, loadJob } from '../job-view.js';
import { watchJob } from '../job-watch.js';
import { addRootOption, foreverOption, rootOf, untilOption, waitMs, type RootFlags } from '../options.js';
import { respond } from '../respond.js';
import { success } from '../responses.js';

interface WaitFlags extends RootFlags {
  until: number;
  forever?: boolean;
}

export function registerWait(program: Command): void {
  addRootOption(
    program.command('wait').description('wait for a job to end, up to a deadline; answers with the state either way').argument('<id>', 'job id, or an unambiguous prefix of one'),
  )
    .addOption(untilOption())
    .addOption(foreverOption())
    .action(
      respond(async (query: string, flags: WaitFlags) => {
        const started = Date.now();
        const view = await watchJob(await loadJob(rootOf(flags), query), (job) => isSettled(job.state), waitMs(flags));
        return success('wait', { ...outcomeFields(view), waited_ms: Date.now() - started });
      }),
    );
}
