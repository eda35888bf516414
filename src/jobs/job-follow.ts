import { formatEventId, OUTPUT_STREAMS, type EventCursor, type JobEvent } from '../contract/job-events.js';
import type { JobStatus } from '../contract/service.js';
import { isTerminal } from '../store/port.js';
import type { JobState } from './job-desk.js';
import { unseen, type OutputFeed } from './output-feed.js';

/** A follower re-reads the job this often even without an event (one may have been missed). */
const RECHECK_MS = 2_000;

export interface FollowSources {
  get(jobId: string): Promise<JobState>;
  onStatus(listener: (jobId: string, status: JobStatus) => void): () => void;
  output: OutputFeed;
}

/**
 * A job's events from `from` on (null: from its start): its status, then its output as it is
 * written, a status on every transition, and `end` with the result. Output a follower missed
 * comes first, from the live feed while the job runs and from the stored result after, in the
 * same byte offsets, so a reconnecting client resumes exactly. Ends when the job has, or when
 * `signal` aborts. The job must exist (get() throws job.not_found before the first event).
 */
export async function* followJob(sources: FollowSources, jobId: string, from: EventCursor | null, signal: AbortSignal): AsyncGenerator<JobEvent> {
  let wake: (() => void) | null = null;
  // Set by a nudge that came while the loop was not waiting: it looks again at once.
  let changed: boolean;
  const nudge = (id: string) => {
    if (id !== jobId) return;
    changed = true;
    wake?.();
  };
  const offStatus = sources.onStatus(nudge);
  const offOutput = sources.output.onAppend(nudge);
  const aborted = () => wake?.();
  signal.addEventListener('abort', aborted);
  try {
    let cursor: EventCursor = from ?? { attempt: 1, stdout: 0, stderr: 0 };
    let announced: string | null = null;
    for (;;) {
      changed = false;
      const state = await sources.get(jobId);
      const attempt = state.attempt ?? 1;
      // Another attempt started (its worker died): its output starts over.
      if (attempt !== cursor.attempt) cursor = { attempt, stdout: 0, stderr: 0 };
      const status = `${attempt}:${state.status}`;
      const fresh = status !== announced;
      announced = status;
      const statusEvent = (): JobEvent => ({ event: 'status', id: formatEventId(cursor), data: { job_id: jobId, status: state.status, attempt } });
      // While it runs: the status, then what was written. Once it ended: the rest of the output first.
      if (fresh && !state.result) yield statusEvent();
      // Output follows the running status: a worker's first output may arrive before that status is stored.
      const output = state.result ? fromResult(state, cursor) : state.status === 'queued' ? [] : await sources.output.since(jobId, cursor);
      for (const chunk of output) {
        cursor = { ...cursor, [chunk.stream]: chunk.offset + Buffer.byteLength(chunk.text) };
        yield { event: chunk.stream, id: formatEventId(cursor), data: { text: chunk.text } };
      }
      if (fresh && state.result) yield statusEvent();
      if (state.result || isTerminal(state.status)) {
        yield { event: 'end', id: formatEventId(cursor), data: state };
        return;
      }
      if (!changed && !signal.aborted) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, RECHECK_MS);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = null;
      }
      if (signal.aborted) return;
    }
  } finally {
    offStatus();
    offOutput();
    signal.removeEventListener('abort', aborted);
  }
}

/** The output the stored result holds past the cursor: the same bytes the live feed had, and any after. */
function fromResult(state: JobState, cursor: EventCursor) {
  const result = state.result!;
  return unseen(
    OUTPUT_STREAMS.map((stream) => ({ stream, offset: 0, text: result[stream].text })).filter((chunk) => chunk.text !== ''),
    cursor,
  );
}
