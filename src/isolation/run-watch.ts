import type { SandboxIO } from './types.js';

/** After a kill, how long to wait for pipes to close before giving up on them. */
const KILL_GRACE_MS = 2000;

export interface RunWatch {
  readonly timedOut: boolean;
  readonly aborted: boolean;
  /** The job is over: no more kills. */
  stop(): void;
}

/**
 * A running job's deadline and cancellation, the same for every backend: either one kills the
 * job (`kill`), and if its output pipes are still open after a grace period (a writer somehow
 * survived), `abandon` stops reading them so the caller is never held.
 */
export function watchRun(io: Pick<SandboxIO, 'timeoutMs' | 'signal'>, job: { kill(): void; abandon(): void }): RunWatch {
  let graceTimer: NodeJS.Timeout | undefined;
  const state = { timedOut: false, aborted: false };
  const killJob = () => {
    job.kill();
    graceTimer ??= setTimeout(() => job.abandon(), KILL_GRACE_MS);
  };
  const onAbort = () => {
    state.aborted = true;
    killJob();
  };
  const timer = setTimeout(() => {
    state.timedOut = true;
    killJob();
  }, io.timeoutMs);
  if (io.signal?.aborted) onAbort();
  io.signal?.addEventListener('abort', onAbort, { once: true });
  return {
    get timedOut() {
      return state.timedOut;
    },
    get aborted() {
      return state.aborted;
    },
    stop() {
      clearTimeout(timer);
      clearTimeout(graceTimer);
      io.signal?.removeEventListener('abort', onAbort);
    },
  };
}
