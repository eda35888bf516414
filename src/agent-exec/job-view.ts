import { readFileSync, statSync } from 'node:fs';
import type { JobState } from '../contract/agent-exec.js';
import { isAlive } from '../isolation/host/process-tree.js';
import { AgentExecError } from './errors.js';
import { resolveJobId } from './job-id.js';
import { jobPaths, listJobIds, readDefinition, readRecord, type JobDefinition, type JobPaths, type JobRecord } from './job-store.js';
import { SUPERVISE_ARG } from './supervise-arg.js';

export interface JobView {
  root: string;
  id: string;
  paths: JobPaths;
  definition: JobDefinition;
  record: JobRecord;
  state: JobState;
}

/** Nothing will change a job in any other state on its own. */
export function isSettled(state: JobState): boolean {
  return state !== 'running';
}

export async function loadJob(root: string, query: string): Promise<JobView> {
  const id = await resolveJobId(root, query);
  return readJob(root, id);
}

export async function readJob(root: string, id: string): Promise<JobView> {
  const paths = jobPaths(root, id);
  let definition: JobDefinition;
  let record: JobRecord;
  try {
    [definition, record] = await Promise.all([readDefinition(paths), readRecord(paths)]);
  } catch (error) {
    // A job being created has its directory a few milliseconds before its files.
    throw new AgentExecError('job_unreadable', `job ${id} cannot be read: ${(error as Error).message}`, { retryable: true });
  }
  let state = effectiveState(record, paths);
  // A supervisor writes the final record, then exits: one found gone may have written it after
  // the record was read (a busy host held this reader between the two). Only a supervisor gone
  // without a final record leaves the job unknown.
  if (state === 'unknown') {
    record = await readRecord(paths).catch(() => record);
    state = effectiveState(record, paths);
  }
  return { root, id, paths, definition, record, state };
}

/** Every job that can be read, newest first, and how many directories could not be. */
export async function readJobs(root: string): Promise<{ jobs: JobView[]; unreadable: number }> {
  const jobs: JobView[] = [];
  let unreadable = 0;
  for (const id of await listJobIds(root)) {
    try {
      jobs.push(await readJob(root, id));
    } catch {
      unreadable++;
    }
  }
  jobs.sort((a, b) => b.record.started_at.localeCompare(a.record.started_at) || a.id.localeCompare(b.id));
  return { jobs, unreadable };
}

export function refresh(view: JobView): Promise<JobView> {
  return readJob(view.root, view.id);
}

function effectiveState(record: JobRecord, paths: JobPaths): JobState {
  if (record.state !== 'running') return record.state;
  return supervisorAlive(record.supervisor_pid, paths) ? 'running' : 'unknown';
}

/**
 * Alive and still ours: a recycled pid runs some other command line (a zombie has none). The
 * directory is compared as a file, since the root may be spelled differently (symlinks) here.
 */
function supervisorAlive(pid: number, paths: JobPaths): boolean {
  if (!isAlive(pid)) return false;
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const at = argv.indexOf(SUPERVISE_ARG);
    if (at === -1 || argv[at + 1] === undefined) return false;
    const [theirs, ours] = [statSync(argv[at + 1]!), statSync(paths.dir)];
    return theirs.ino === ours.ino && theirs.dev === ours.dev;
  } catch {
    return false;
  }
}

export function elapsedMs(record: JobRecord): number {
  const end = record.finished_at === null ? Date.now() : Date.parse(record.finished_at);
  return Math.max(0, Math.round(end - Date.parse(record.started_at)));
}
