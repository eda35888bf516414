import type { JobDesk } from '../jobs/job-desk.js';
import type { WorkerProcess } from '../jobs/worker-process.js';
import type { SessionHost } from '../sessions/session-host.js';
import type { SandboxHost } from '../sandboxes/sandbox-host.js';

/** What either mode (embedded, cluster) hands the HTTP face: a desk for jobs and the worker process beside it. */
export interface DeskAndWorker {
  desk: JobDesk;
  worker: WorkerProcess;
  /** How the session routes reach a session by id. */
  sessions: SessionHost;
  /** How the sandbox routes (ours and E2B's) reach a sandbox by id. */
  sandboxes: SandboxHost;
  /** SIGTERM: stop admitting, give running jobs `graceMs`, cancel the rest, stop the worker. */
  drain(graceMs: number): Promise<void>;
}
