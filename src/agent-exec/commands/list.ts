import { Option, type Command } from 'commander';
import type { JobState } from '../../contract/agent-exec.js';
import { summaryFields, tagsOf } from '../job-fields.js';
import { readJobs } from '../job-view.js';
import { addRootOption, count, rootOf, tags, type RootFlags } from '../options.js';
import { respond } from '../respond.js';
import { success } from '../responses.js';

const STATES: JobState[] = ['running', 'exited', 'killed', 'failed', 'unknown'];
const DEFAULT_LIMIT = 50;

interface ListFlags extends RootFlags {
  state?: JobState;
  tag: string[];
  limit: number;
}

export function registerList(program: Command): void {
  addRootOption(program.command('list').description('jobs, newest first'))
    .addOption(new Option('--state <state>', 'only jobs in this state').choices(STATES))
    .addOption(new Option('--tag <tag>', 'only jobs with this tag (repeatable: with all of them)').argParser(tags).default([]))
    .addOption(new Option('--limit <n>', 'at most this many jobs').argParser(count).default(DEFAULT_LIMIT))
    .action(
      respond(async (flags: ListFlags) => {
        const root = rootOf(flags);
        const { jobs, unreadable } = await readJobs(root);
        const matching = jobs.filter((job) => (flags.state === undefined || job.state === flags.state) && flags.tag.every((tag) => tagsOf(job).includes(tag)));
        return success('list', {
          root,
          jobs: matching.slice(0, flags.limit).map(summaryFields),
          truncated: matching.length > flags.limit,
          skipped: unreadable,
        });
      }),
    );
}
