import { Option, type Command } from 'commander';
import { outcomeFields } from '../job-fields.js';
import { isSettled, loadJob } from '../job-view.js';
import { watchJob } from '../job-watch.js';
import { addRootOption, rootOf, signalName, type RootFlags } from '../options.js';
import { respond } from '../respond.js';
import { success } from '../responses.js';
import { stopJob, stopTimeoutMs } from '../stop-job.js';

interface KillFlags extends RootFlags {
  signal: NodeJS.Signals;
}

export function registerKill(program: Command): void {
  addRootOption(
    program
      .command('kill')
      .description("end a job's whole process tree: the signal first, SIGKILL after the job's --kill-after; answers once it has ended")
      .argument('<id>', 'job id, or an unambiguous prefix of one'),
  )
    .addOption(new Option('--signal <name>', 'the first signal (TERM, INT, HUP, KILL...)').argParser(signalName).default('SIGTERM'))
    .action(
      respond(async (query: string, flags: KillFlags) => {
        const view = await loadJob(rootOf(flags), query);
        // Ending a job that already ended is done: say so rather than fail.
        const signalled = view.state === 'running' || view.state === 'unknown';
        await stopJob(view, flags.signal);
        const after = await watchJob(view, (job) => isSettled(job.state), stopTimeoutMs(view));
        return success('kill', { ...outcomeFields(after), signal: flags.signal, signalled });
      }),
    );
}
