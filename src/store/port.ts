import type { FileHandle } from 'node:fs/promises';
import type { RunJobResult } from '../contract/run-job.js';
import { TERMINAL_STATUSES } from '../contract/run-job.js';
import type { JobStatus } from '../contract/service.js';

/** What the store keeps per job besides its request and result, and what listings show. */
export interface StatusRecord {
  job_id: string;
  status: JobStatus;
  created_at: string;
  updated_at: string;
  trace_id?: string;
  /** Attempts made at the job so far (distributed mode: more than one when a worker died mid-job). */
  attempt?: number;
  /** The name of the API key that submitted it (service.apiKeys); absent: the service token. */
  api_key?: string;
}

export class DuplicateJobError extends Error {
  constructor(readonly jobId: string) {
    super(`a job with id ${jobId} already exists`);
  }
}

/**
 * The store cannot take writes now (a full disk, a quota, a failing device, a read-only
 * remount), and may once an operator acts: what it holds can still be read.
 */
export class StoreUnavailableError extends Error {
  constructor(
    /** What the store met, e.g. `ENOSPC`. */
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`the run store cannot take writes (${reason})`, options);
  }
}

export function isTerminal(status: JobStatus): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/** What a worker writes: that the job runs, then its one result. */
export interface ResultSink {
  setStatus(record: StatusRecord, status: JobStatus): Promise<StatusRecord>;
  /** The result first, then the terminal status: a status never claims a result that is not there. */
  finish(record: StatusRecord, result: RunJobResult): Promise<StatusRecord>;
  /** Where the job's full logs and collected artifacts go. */
  runDir(jobId: string): string;
}

/**
 * The run store port: the durable record of every job. The embedded default is a directory
 * (disk-store.ts); every write is atomic, so a crash at any moment leaves each record whole.
 * A write the store cannot take now throws StoreUnavailableError and leaves nothing behind.
 */
export interface RunStore extends ResultSink {
  open(): Promise<void>;
  /** Resolves when the store takes a write now (it writes and removes a small file of its own). */
  checkWritable(): Promise<void>;
  /** Records the request and a `queued` status, with the key it came with (undefined: the service token); a taken id throws DuplicateJobError. */
  create(jobId: string, request: unknown, traceId: string | undefined, apiKey?: string): Promise<StatusRecord>;
  readRequest(jobId: string): Promise<unknown>;
  readResult(jobId: string): Promise<RunJobResult | null>;
  /** Every job kept; entries without a readable status are reported, not trusted. */
  load(): Promise<{ records: StatusRecord[]; unreadable: string[] }>;
  /** A collected artifact by the path its result lists, opened without following links. */
  openArtifact(jobId: string, path: string): Promise<FileHandle>;
  remove(jobId: string): Promise<void>;
}
