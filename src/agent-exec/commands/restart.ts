import type { Command } from 'commander';
import { AgentExecError } from '../errors.js';
import { resetLogs } from '../job-store.js';
import { isSettled, loadJob, type JobView } from '../job-view.js';
import { watchJob } from '../job-watch.js';
import { launchSupervisor } from '../launch.js';
import { addObserveOptions, rootOf, type ObserveFlags } from '../options.js';
import { respond } from '../respond.js';
import { observeJob } from '../run-response.js';
import { checkBackend, checkSandboxAvailable } from '../sandbox-check.js';
import { stopJob, stopTimeoutMs } from '../stop-job.js';

export function registerRestart(program: Command): void {
  addObserveOptions(
    program
      .command('restart')
      .description('run a job again under the same id and definition: its old tree is ended first and its logs start empty')
      .argument('<id>', 'job id, or an unambiguous prefix of one'),
  ).action(
    respond(async (query: string, flags: ObserveFlags) => {
      const root = rootOf(flags);
      const view = await loadJob(root, query);
      const { definition } = view;
      if (definition.sandbox === 'workspace') {
        await checkBackend(definition.backend ?? 'local_process');
        checkSandboxAvailable(definition.bwrap_path, definition.cwd, root);
      }
      await endPrevious(view);
      await resetLogs(view.paths);
      return observeJob('restart', await launchSupervisor(root, view.paths), flags);
    }),
  );
}

/**
 * The old run is over before the new one may write the record: settled, which its supervisor
 * writes last of all it writes there (what it does after, such as notifying, is not the new
 * run's concern), or with its supervisor gone.
 */
async function endPrevious(view: JobView): Promise<void> {
  await stopJob(view, 'SIGTERM');
  const timeoutMs = stopTimeoutMs(view);
  const ended = await watchJob(view, (job) => isSettled(job.state), timeoutMs);
  if (!isSettled(ended.state)) {
    throw new AgentExecError('internal_error', `job ${view.id} did not end within ${timeoutMs} ms; it was not restarted`, { retryable: true });
  }
}
