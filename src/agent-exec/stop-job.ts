import { writeFileAtomic } from '../util/atomic-write.js';
import { killUntilGone, processesWithMarker, signalQuietly } from '../isolation/host/process-tree.js';
import { markerOf } from './job-env.js';
import { isSettled, type JobView } from './job-view.js';
import { watchJob } from './job-watch.js';

const ORPHAN_KILL_MS = 5000;
const LAUNCH_WAIT_MS = 15_000;
/** Beyond the job's own grace: time for its supervisor to record the end and exit. */
const SETTLE_MARGIN_MS = 5000;

/** How long ending a job may take once asked: SIGKILL comes after its grace. */
export function stopTimeoutMs(view: JobView): number {
  return view.definition.kill_after_s * 1000 + SETTLE_MARGIN_MS;
}

/**
 * Asks a running job's supervisor to end it with `signal` (SIGKILL after the job's grace):
 * the supervisor owns the tree and records how the job ended. A job whose supervisor died
 * (state unknown) has no one to ask, so its marked processes are killed from here.
 */
export async function stopJob(view: JobView, signal: NodeJS.Signals): Promise<void> {
  // Until the record has the job's pid the supervisor has no handler for the request yet.
  const current = await watchJob(view, (job) => job.record.pid !== null || isSettled(job.state), LAUNCH_WAIT_MS);
  if (current.state === 'running') {
    await writeFileAtomic(current.paths.killRequest, JSON.stringify({ signal, requested_at: new Date().toISOString() }));
    signalQuietly(current.record.supervisor_pid, 'SIGUSR1');
  } else if (current.state === 'unknown') {
    await killUntilGone(() => processesWithMarker(markerOf(current.id)), ORPHAN_KILL_MS);
  }
}
