import type { BackendDescription } from '../contract/backend.js';
import type { OutputStream } from '../contract/job-events.js';
import type { RunJobResult } from '../contract/run-job.js';
import type { Runtime } from '../contract/runtimes.js';
import type { Session, SessionCreateRequest, SessionExecRequest, SessionExecResult, SessionFileWritten } from '../contract/session.js';
import type { SnippetResponse } from '../contract/snippet.js';
import type { TaskResponse } from '../contract/task.js';
import type { RunnerConfig } from '../runner/config.js';
import type { MetricsJson } from '../util/metrics.js';
import type {
  Sandbox,
  SandboxCreateRequest,
  SandboxExecRequest,
  SandboxExecResult,
  SandboxFileWritten,
  SandboxForkRequest,
  SandboxForkResult,
  SandboxMetrics,
  SandboxPauseRequest,
  Snapshot,
  SnapshotCreateRequest,
  SandboxRunCodeRequest,
  SandboxRunCodeResult,
} from '../contract/sandbox.js';
import type { Volume, VolumeCreateRequest } from '../contract/volumes.js';
import type { VolumeGranted } from '../sandboxes/sandbox-volumes.js';

/**
 * The one protocol between a front door and its worker process (worker-process.ts forks,
 * worker-main.ts runs): what each side answers (`calls`, one reply each) and hears
 * (`notices`, no reply). Both sides' IpcChannel is typed by it, so tsc checks every name,
 * argument and result of `call`/`handle` and `notify`/`onNotice` on both ends.
 */
export interface ProtocolSide {
  calls: Record<string, (...args: never[]) => unknown>;
  notices: Record<string, unknown>;
}

/** A job handed out with its claim: one round trip. */
export interface LeasedJob {
  jobId: string;
  request: unknown;
  runDir: string;
}

export type LogLevel = 'info' | 'warn' | 'error';

/** What the worker process answers and hears. */
export type WorkerSide = {
  calls: {
    /** The worker's runtime and its job loop with `slots` slots; answers where its sandboxes' envd listens. */
    init(config: RunnerConfig, slots: number): { envdSocket: string; syncSocket: string };
    /** `token` names the call for an `abort` notice (a client that hung up). */
    exec(token: number, request: unknown): SnippetResponse;
    task(token: number, request: unknown): TaskResponse;
    backends(): BackendDescription[];
    runtimes(): Runtime[];
    /** After its jobs ended: it ends its sessions, records what it holds and disposes of its sandboxes. */
    stop(): void;
    // Sessions live in the worker process (sessions/sessions.ts); the front door routes to them by id.
    sessionCreate(request: SessionCreateRequest, apiKey?: string): Session;
    sessionList(): Session[];
    sessionDescribe(id: string): Session;
    sessionExec(id: string, request: SessionExecRequest): SessionExecResult;
    /** Bytes cross as a Uint8Array: structured cloning keeps the bytes, not the Buffer class. */
    sessionWriteFile(id: string, path: string, content: Uint8Array): SessionFileWritten;
    sessionReadFile(id: string, path: string): Uint8Array;
    sessionRemove(id: string): Session;
    /** The service is stopping: every session ends, new ones are refused. */
    sessionsClose(): void;
    // Long-lived sandboxes live in the worker process too (sandboxes/sandboxes.ts).
    sandboxCreate(request: SandboxCreateRequest, apiKey?: string): Sandbox;
    sandboxList(): Sandbox[];
    sandboxDescribe(id: string): Sandbox;
    sandboxSetTimeout(id: string, timeoutSeconds: number): Sandbox;
    sandboxKill(id: string): Sandbox;
    sandboxMetrics(id: string): SandboxMetrics;
    sandboxConnect(id: string, timeoutSeconds?: number): Sandbox;
    /** The worker's Prometheus metrics (util/metrics.ts) as JSON, for /metrics to merge with the front door's. */
    metrics(): MetricsJson;
    sandboxPause(id: string, request?: SandboxPauseRequest): Sandbox;
    sandboxResume(id: string, timeoutSeconds?: number): { sandbox: Sandbox; resumed: boolean };
    sandboxFork(id: string, request?: SandboxForkRequest): SandboxForkResult;
    sandboxSnapshot(id: string, request?: SnapshotCreateRequest): Snapshot;
    snapshotList(filter?: { sandbox_id?: string; name?: string }): Snapshot[];
    snapshotDelete(idOrName: string, apiKey?: string): Snapshot;
    sandboxExec(id: string, request: SandboxExecRequest): SandboxExecResult;
    sandboxRunCode(id: string, request: SandboxRunCodeRequest): SandboxRunCodeResult;
    /** One slice of a file: `append` false starts it (truncating), true adds to it. */
    sandboxWriteFile(id: string, path: string, content: Uint8Array, append: boolean): SandboxFileWritten;
    sandboxReadFile(id: string, path: string): Uint8Array;
    /** The service is stopping: every sandbox is killed, new ones are refused. */
    sandboxesClose(): void;
    volumeCreate(request: VolumeCreateRequest, apiKey?: string): VolumeGranted;
    volumeList(apiKey?: string): Volume[];
    volumeDescribe(idOrName: string, apiKey?: string): VolumeGranted;
    volumeDelete(idOrName: string, apiKey?: string, force?: boolean): Volume;
  };
  notices: {
    /** A job it leased was canceled. */
    cancel: string;
    /** Every running job is canceled (the grace is over). */
    cancelAll: null;
    /** The snippet or task of this token: its caller is gone. */
    abort: number;
    /**
     * A client's connection for its sandboxes' traffic, handed over with the bytes the front door
     * read of it (its first request's head, at least): served here from then on.
     */
    connection: Uint8Array;
    /** Where its front door takes back the requests on such a connection that are not a sandbox's (the service's own routes). */
    frontDoor: string;
  };
};

/** What the front door answers and hears from its worker. */
export type FrontDoorSide = {
  calls: {
    lease(): LeasedJob | null;
    finish(jobId: string, result: RunJobResult): void;
  };
  notices: {
    running: string;
    output: { jobId: string; stream: OutputStream; text: string };
    complete: string;
    fail: string;
    log: { level: LogLevel; obj: object; msg: string };
  };
};

/** The bytes a Uint8Array of the protocol carries, as a Buffer (no copy). */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
