import type { Command } from 'commander';
import { summaryFields } from '../job-fields.js';
import { loadJob } from '../job-view.js';
import { addRootOption, rootOf, type RootFlags } from '../options.js';
import { removeJob } from '../remove-job.js';
import { respond } from '../respond.js';
import { success } from '../responses.js';

export function registerDelete(program: Command): void {
  addRootOption(
    program
      .command('delete')
      .description('delete a job that is not running: its definition, record and logs (a running job is refused with invalid_state: kill it first)')
      .argument('<id>', 'job id, or an unambiguous prefix of one'),
  )
    .addHelpText('after', '\nExample: agent-exec kill 3f2a; agent-exec delete 3f2a')
    .action(
      respond(async (query: string, flags: RootFlags) => {
        const root = rootOf(flags);
        const view = await loadJob(root, query);
        await removeJob(view);
        return success('delete', { root, ...summaryFields(view) });
      }),
    );
}
