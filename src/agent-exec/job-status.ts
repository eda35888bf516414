import type { AgentExecResponse } from '../contract/agent-exec.js';
import { logPathFields, outcomeFields, tagsOf, timingFields } from './job-fields.js';
import { logKeyOf } from './job-store.js';
import type { JobView } from './job-view.js';
import { limitsOf } from './limits.js';
import { logExtent } from './log-ranges.js';
import { success } from './responses.js';

export type StatusResponse = Extract<AgentExecResponse, { type: 'status' }>;

/** All a job's record says, and its log sizes: what `status` prints, and what --notify-url and --notify-command get when it ends. */
export async function statusResponse(view: JobView): Promise<StatusResponse> {
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
}
