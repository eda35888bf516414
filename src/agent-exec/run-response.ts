import type { RunLikeResponse, Snapshot } from '../contract/agent-exec.js';
import { describeEnv } from './job-env.js';
import { excerptFields, readStreams, type StreamExcerpts } from './excerpts.js';
import { outcomeFields } from './job-fields.js';
import { elapsedMs, isSettled, type JobView } from './job-view.js';
import { watchJob } from './job-watch.js';
import { encodingOf, lastLines } from './log-ranges.js';
import { waitMs, type ObserveFlags } from './options.js';
import { success } from './responses.js';

/**
 * The answer to run and restart: the job watched for as long as the caller allowed, then
 * its state, the tail of each stream (raw and compressed) and a few-lines snapshot.
 */
export async function observeJob(type: 'run' | 'restart', launched: JobView, flags: ObserveFlags): Promise<RunLikeResponse> {
  const started = Date.now();
  const view = await watchJob(launched, (job) => isSettled(job.state), waitMs(flags));
  const waited = Date.now() - started;
  const excerpts = await readStreams(view, { maxBytes: flags.maxBytes });
  return success(type, {
    ...outcomeFields(view),
    env_vars: describeEnv(view.definition),
    waited_ms: waited,
    elapsed_ms: elapsedMs(view.record),
    ...(await excerptFields(view, excerpts, flags.compress)),
    snapshot: snapshot(excerpts, flags.tailLines),
  });
}

function snapshot(excerpts: StreamExcerpts, tailLines: number): Snapshot {
  const stdout = lastLines(excerpts.stdout.bytes, tailLines);
  const stderr = lastLines(excerpts.stderr.bytes, tailLines);
  return {
    stdout_tail: stdout.toString('utf8'),
    stderr_tail: stderr.toString('utf8'),
    truncated: stdout.length < excerpts.stdout.total || stderr.length < excerpts.stderr.total,
    encoding: encodingOf(stdout, stderr),
    stdout_observed_bytes: excerpts.stdout.total,
    stderr_observed_bytes: excerpts.stderr.total,
    stdout_included_bytes: stdout.length,
    stderr_included_bytes: stderr.length,
  };
}
