import { Option, type Command } from 'commander';
import { retentionPolicy } from '../../util/retention.js';
import { configuredRetention, retireJobs } from '../job-retention.js';
import { addRootOption, count, duration, rootOf, type RootFlags } from '../options.js';
import { respond } from '../respond.js';
import { success } from '../responses.js';

interface GcFlags extends RootFlags {
  olderThan?: number;
  keep?: number;
  dryRun?: boolean;
}

export function registerGc(program: Command): void {
  addRootOption(
    program
      .command('gc')
      .description(
        "delete jobs that ended (exited, killed, failed) by age and by count: as --older-than and --keep say, else as the configuration's retention says (which each job's supervisor applies by itself once its job ends)",
      ),
  )
    .addOption(new Option('--older-than <duration>', 'delete jobs that ended longer ago than this: 45s, 90m, 12h, 30d, 2w').argParser(duration))
    .addOption(new Option('--keep <n>', 'keep at most this many jobs; beyond it the oldest ended ones go').argParser(count))
    .option('--dry-run', 'delete nothing: list what would go')
    .addHelpText('after', '\nExample: agent-exec gc --older-than 7d --keep 100 --dry-run')
    .action(
      respond(async (flags: GcFlags) => {
        const root = rootOf(flags);
        const fromFlags = flags.olderThan !== undefined || flags.keep !== undefined;
        const policy = fromFlags
          ? { maxAgeMs: flags.olderThan === undefined ? null : flags.olderThan * 1000, maxCount: flags.keep ?? null }
          : retentionPolicy(await configuredRetention());
        const dryRun = flags.dryRun ?? false;
        const outcome = await retireJobs(root, policy, { dryRun });
        return success('gc', {
          root,
          dry_run: dryRun,
          policy_source: fromFlags ? 'flags' : 'config',
          older_than_s: policy.maxAgeMs === null ? null : policy.maxAgeMs / 1000,
          keep: policy.maxCount,
          jobs: outcome.jobs,
          deleted: outcome.deleted,
          kept: outcome.kept,
          skipped: outcome.unreadable,
        });
      }),
    );
}
