import type { JobSummary } from '../contract/agent-exec.js';
import { elapsedMs, type JobView } from './job-view.js';
import type { ResponseBody } from './responses.js';

type Outcome = Pick<ResponseBody<'wait'>, 'job_id' | 'state' | 'exit_code' | 'exit_signal' | 'reason' | 'error'>;
type Timing = Pick<ResponseBody<'status'>, 'started_at' | 'finished_at' | 'elapsed_ms'>;
type LogPaths = Pick<ResponseBody<'tail'>, 'stdout_log_path' | 'stderr_log_path' | 'full_log_path'>;

/** How the job stands: what status, wait, kill, run and restart all say first. */
export function outcomeFields(view: JobView): Outcome {
  const { record } = view;
  return {
    job_id: view.id,
    state: view.state,
    exit_code: record.exit_code,
    exit_signal: record.signal,
    reason: record.reason,
    ...(record.error !== null ? { error: record.error } : {}),
  };
}

/** One job in a list, with its command to tell jobs apart. */
export function summaryFields(view: JobView): JobSummary {
  const { record } = view;
  return {
    job_id: view.id,
    state: view.state,
    exit_code: record.exit_code,
    started_at: record.started_at,
    finished_at: record.finished_at,
    updated_at: record.updated_at,
    argv: view.definition.argv,
    tags: tagsOf(view),
  };
}

export function tagsOf(view: JobView): string[] {
  return view.definition.tags ?? [];
}

export function timingFields(view: JobView): Timing {
  return { started_at: view.record.started_at, finished_at: view.record.finished_at, elapsed_ms: elapsedMs(view.record) };
}

export function logPathFields(view: JobView): LogPaths {
  return { stdout_log_path: view.paths.stdout, stderr_log_path: view.paths.stderr, full_log_path: view.paths.full };
}
