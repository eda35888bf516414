import type { Readable } from 'node:stream';
import type { EventCursor, JobEvent } from '../contract/job-events.js';
import type { Artifact, RunJobResult } from '../contract/run-job.js';
import type { JobStatus } from '../contract/service.js';
import type { QueueStats } from '../queue/port.js';
import type { StatusRecord } from '../store/port.js';
import type { StoreAvailability } from '../store/resilient-store.js';
import { contractError } from '../contract/errors.js';
import { ServiceError } from './service-error.js';

export interface JobState extends StatusRecord {
  result?: RunJobResult;
}

export interface JobPage {
  jobs: StatusRecord[];
  next_cursor: string | null;
}

/**
 * The job system as the HTTP face sees it: admit, read, wait, list, cancel, artifacts, health.
 * Two desks answer it: the embedded front door (front-door.ts: one process, the on-disk store)
 * and the cluster's (postgres/cluster-front-door.ts: any number of them over one database).
 */
export interface JobDesk {
  /** Admits a job for the API key named `apiKey` (undefined: the service token), which it then belongs to. */
  submit(request: unknown, apiKey?: string): Promise<StatusRecord>;
  get(jobId: string): Promise<JobState>;
  /** Resolves on the job's terminal state or after `waitMs`, whichever first. */
  waitForTerminal(jobId: string, waitMs: number, signal?: AbortSignal): Promise<JobState>;
  /** The job's events from the cursor on (null: its start) until it ends (job-follow.ts); rejects job.not_found first. */
  follow(jobId: string, from: EventCursor | null, signal: AbortSignal): Promise<AsyncGenerator<JobEvent>>;
  /** A queued job never runs; a running one is stopped. Resolves with its status after. */
  cancel(jobId: string): Promise<StatusRecord>;
  /**
   * Newest first; the cursor is the last job of the previous page. Of the key `apiKey` only
   * (undefined: the service token, which sees all): a cursor naming another key's job is unknown.
   */
  list(limit: number, cursor: string | undefined, status?: JobStatus, apiKey?: string): Promise<JobPage>;
  artifacts(jobId: string): Promise<Artifact[]>;
  /** A stored artifact by the path its result lists; any other path is not found. */
  openArtifact(jobId: string, path: string): Promise<{ artifact: Artifact; content: Readable }>;
  health(): QueueStats;
  storeHealth(): StoreAvailability;
}

/** The artifacts a job's result lists: none before it ends (409 job.not_terminal). */
export function listedArtifacts(state: JobState): Artifact[] {
  if (!state.result)
    throw new ServiceError(contractError('job.not_terminal', `job ${state.job_id} is ${state.status}; artifacts exist once it is terminal`), { status: state.status });
  return state.result.artifacts;
}

/** The one of them at `path`; a path the result does not list is not found, whatever is stored. */
export function listedArtifact(artifacts: readonly Artifact[], jobId: string, path: string): Artifact {
  const artifact = artifacts.find((candidate) => candidate.path === path);
  if (!artifact) throw artifactNotFound(jobId, path);
  return artifact;
}

/** No job by that id (or none the asking API key may see). */
export function jobNotFound(jobId: string): ServiceError {
  return new ServiceError(contractError('job.not_found', `no job with id ${jobId}`));
}

export function artifactNotFound(jobId: string, path: string): ServiceError {
  return new ServiceError(contractError('job.not_found', `job ${jobId} has no artifact ${JSON.stringify(path)}`));
}
