import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { AgentExecError } from './errors.js';
import { stdioWithoutLeaks } from '../isolation/host/fd-hygiene.js';
import { writeRecord, type JobPaths } from './job-store.js';
import { readJob, type JobView } from './job-view.js';
import { watchJob } from './job-watch.js';
import { SUPERVISE_ARG } from './supervise-arg.js';

/** A supervisor is a fresh node process: starting it takes a moment, far less than this. */
const LAUNCH_TIMEOUT_MS = 15_000;

/**
 * Starts the job's supervisor (this executable again, with SUPERVISE_ARG) in its own
 * session, records it, and returns once it has spawned the job or failed to. The job's
 * definition and empty logs must already be in place.
 */
export async function launchSupervisor(root: string, paths: JobPaths): Promise<JobView> {
  const devNull = openSync('/dev/null', 'r');
  const diagnostics = openSync(paths.supervisorLog, 'a', 0o600);
  let pid: number;
  try {
    const stdio = stdioWithoutLeaks<'pipe' | number>(['pipe', 'ignore', diagnostics], devNull);
    const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, SUPERVISE_ARG, paths.dir], { detached: true, stdio });
    pid = await new Promise<number>((resolve, reject) => child.once('spawn', () => resolve(child.pid!)).once('error', reject));
    // The record names the supervisor before it can write one itself: its stdin is the gate.
    const now = new Date().toISOString();
    await writeRecord(paths, {
      state: 'running',
      supervisor_pid: pid,
      pid: null,
      started_at: now,
      finished_at: null,
      updated_at: now,
      exit_code: null,
      signal: null,
      reason: null,
      error: null,
    });
    child.stdin!.end();
    child.unref();
  } catch (error) {
    throw new AgentExecError('launch_failed', `cannot start the job's supervisor: ${(error as Error).message}`, { retryable: true });
  } finally {
    closeSync(devNull);
    closeSync(diagnostics);
  }
  const view = await watchJob(await readJob(root, paths.id), (job) => job.record.pid !== null || job.state !== 'running', LAUNCH_TIMEOUT_MS);
  if (view.state === 'unknown' || (view.state === 'running' && view.record.pid === null)) {
    const said = readFileSync(paths.supervisorLog, 'utf8').trim().split('\n').slice(-3).join(' | ');
    throw new AgentExecError('launch_failed', `the job's supervisor (pid ${pid}) did not start the job${said ? `: ${said}` : ''}`, { retryable: true });
  }
  return view;
}
