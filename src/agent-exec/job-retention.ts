import { join } from 'node:path';
import type { RetiredJob } from '../contract/agent-exec.js';
import type { RetentionSettings } from '../config/schema.js';
import { deferPass, expired, passDue, retentionPolicy, type RetentionPolicy } from '../util/retention.js';
import { AgentExecError } from './errors.js';
import { summaryFields } from './job-fields.js';
import { readJobs } from './job-view.js';
import { removeJob } from './remove-job.js';

/** Beside jobs/, so it is never taken for a job. */
const STAMP = '.retention';

export interface Retirement {
  jobs: RetiredJob[];
  deleted: number;
  kept: number;
  unreadable: number;
}

/**
 * Applies `policy` to the jobs under `root`: jobs that ended (exited, killed, failed) may go;
 * running ones never, nor unknown ones, whose processes may outlive their supervisor (delete
 * kills those). With dryRun, only says what would go.
 */
export async function retireJobs(root: string, policy: RetentionPolicy, options: { dryRun: boolean }): Promise<Retirement> {
  const { jobs, unreadable } = await readJobs(root);
  const entries = jobs.map((view) => {
    const ended = view.state !== 'running' && view.state !== 'unknown';
    return { id: view.id, bornAt: Date.parse(view.record.started_at), endedAt: ended ? Date.parse(view.record.finished_at ?? view.record.updated_at) : null, view };
  });
  const going = expired(entries, policy);
  let deleted = 0;
  if (!options.dryRun) {
    for (const { entry } of going) {
      try {
        await removeJob(entry.view);
        deleted++;
      } catch (error) {
        // Restarted, or deleted by someone else, since it was read: it is no longer ours to delete.
        if (!(error instanceof AgentExecError)) throw error;
      }
    }
  }
  return {
    jobs: going.map(({ entry, reason }) => ({ ...summaryFields(entry.view), reason })),
    deleted,
    kept: jobs.length - (options.dryRun ? going.length : deleted),
    unreadable,
  };
}

/** The retention section of agent-runner's configuration, loaded only when needed: loading it takes most of a second. */
export async function configuredRetention(): Promise<RetentionSettings> {
  const { loadConfig } = await import('../config/load.js');
  return loadConfig(process.env).retention;
}

/** The automatic pass, when one is due for this root: cheap (one stat) when it is not. */
export async function retainIfDue(root: string): Promise<void> {
  const stamp = join(root, STAMP);
  if (!(await passDue(stamp))) return;
  const settings = await configuredRetention();
  await deferPass(stamp, settings.intervalMinutes * 60_000);
  await retireJobs(root, retentionPolicy(settings), { dryRun: false });
}
