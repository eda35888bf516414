import { rm } from 'node:fs/promises';
import { AgentExecError } from './errors.js';
import { refresh, type JobView } from './job-view.js';
import { stopJob } from './stop-job.js';

/**
 * Deletes a job: its definition, record, stdin and logs. A running job is refused, as
 * tumf/agent-exec refuses it (invalid_state): its supervisor owns the directory, and deleting it
 * underneath would leave a process tree that no command can find, stop or report on. Stopping
 * it first is the caller's explicit choice (`kill`, then `delete`). A job whose supervisor died
 * (unknown) has nobody left to ask: its leftover processes are killed here, so nothing of it
 * outlives its record.
 */
export async function removeJob(view: JobView): Promise<void> {
  // Read again: a restart may have started it since the caller looked.
  const current = await refresh(view);
  if (current.state === 'running') {
    throw new AgentExecError('invalid_state', `job ${current.id} is running: stop it first (agent-exec kill ${current.id}), then delete it`);
  }
  if (current.state === 'unknown') await stopJob(current, 'SIGKILL');
  await rm(current.paths.dir, { recursive: true, force: true });
}
