import type { Command } from 'commander';
import { logPathFields, outcomeFields, tagsOf, timingFields } from '../job-fields.js';
import { logKeyOf } from '../job-store.js';
import { limitsOf } from '../limits.js';
import { logExtent } from '../log-ranges.js';
import { loadJob } from '../job-view.js';
import { addRootOption, rootOf, type RootFlags } from '../options.js';
import { respond } from '../respond.js';
import { success } from '../responses.js';

export function registerStatus(program: Command): void {
  addRootOption(program.command('status').description("a job's state, exit code, times, command and log sizes").argument('<id>', 'job id, or an unambiguous prefix of one')).action(
    respond(async (query: string, flags: RootFlags) => {
      const view = await loadJob(rootOf(flags), query);
      const { definition, record } = view;
      const [stdout, stderr] = await Promise.all([logExtent(view.paths.stdout, logKeyOf(definition)), logExtent(view.paths.stderr, logKeyOf(definition))]);
      return success('status', {
        ...outcomeFields(view),
        ...timingFields(view),
        updated_at: record.updated_at,
        pid: record.pid,
        argv: definition.argv,
        tags: tagsOf(view),
        cwd: definition.cwd,
        sandbox: definition.sandbox,
        network: definition.network,
        timeout_s: definition.timeout_s,
        limits: { ...limitsOf(definition), ...(record.limits_enforced_by ? { enforced_by: record.limits_enforced_by } : {}) },
        ...(definition.sandbox === 'workspace' ? { read_paths: definition.read_paths ?? [], write_paths: definition.write_paths ?? [] } : {}),
        ...logPathFields(view),
        stdout_total_bytes: stdout!.total,
        stderr_total_bytes: stderr!.total,
        stdout_first_offset: stdout!.start,
        stderr_first_offset: stderr!.start,
      });
    }),
  );
}
