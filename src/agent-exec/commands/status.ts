import type { Command } from 'commander';
import { stat } from 'node:fs/promises';
import { logPathFields, outcomeFields, timingFields } from '../job-fields.js';
import { loadJob } from '../job-view.js';
import { addRootOption, rootOf, type RootFlags } from '../options.js';
import { respond } from '../respond.js';
import { success } from '../responses.js';

export function registerStatus(program: Command): void {
  addRootOption(program.command('status').description("a job's state, exit code, times, command and log sizes").argument('<id>', 'job id, or an unambiguous prefix of one')).action(
    respond(async (query: string, flags: RootFlags) => {
      const view = await loadJob(rootOf(flags), query);
      const size = async (path: string) => (await stat(path).catch(() => null))?.size ?? 0;
      const { definition, record } = view;
      return success('status', {
        ...outcomeFields(view),
        ...timingFields(view),
        updated_at: record.updated_at,
        pid: record.pid,
        argv: definition.argv,
        cwd: definition.cwd,
        sandbox: definition.sandbox,
        network: definition.network,
        timeout_s: definition.timeout_s,
        ...logPathFields(view),
        stdout_total_bytes: await size(view.paths.stdout),
        stderr_total_bytes: await size(view.paths.stderr),
      });
    }),
  );
}
