import { elapsedMs, type JobView } from './job-view.js';

/** How the job stands: what status, wait, kill, run and restart all say first. */
export function outcomeFields(view: JobView): Record<string, unknown> {
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

/** One job in a list (the schema's JobSummary), with its command to tell jobs apart. */
export function summaryFields(view: JobView): Record<string, unknown> {
  const { record } = view;
  return {
    job_id: view.id,
    state: view.state,
    exit_code: record.exit_code,
    started_at: record.started_at,
    finished_at: record.finished_at,
    updated_at: record.updated_at,
    argv: view.definition.argv,
  };
}

export function timingFields(view: JobView): Record<string, unknown> {
  return { started_at: view.record.started_at, finished_at: view.record.finished_at, elapsed_ms: elapsedMs(view.record) };
}

export function logPathFields(view: JobView): Record<string, string> {
  return { stdout_log_path: view.paths.stdout, stderr_log_path: view.paths.stderr, full_log_path: view.paths.full };
}
