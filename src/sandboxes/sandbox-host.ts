import type { Socket } from 'node:net';
import { CodedError, contractError } from '../contract/errors.js';
import type {
  Sandbox,
  SandboxCreateRequest,
  SandboxExecRequest,
  SandboxExecResult,
  SandboxFileWritten,
  SandboxForkRequest,
  SandboxForkResult,
  SandboxPauseRequest,
  Snapshot,
  SnapshotCreateRequest,
  SandboxMetrics,
  SandboxRunCodeRequest,
  SandboxRunCodeResult,
} from '../contract/sandbox.js';
import type { Volume, VolumeCreateRequest } from '../contract/volumes.js';
import type { VolumeGranted } from './sandbox-volumes.js';

/**
 * Where sandboxes live, as the front door sees it: every operation by sandbox id, each failing
 * with a CodedError (sandbox.not_found, sandbox.ended, sandboxes.full, ...). The sandboxes run in
 * the worker process beside the front door; their envd answers on a unix socket of that process
 * (`envdSocket`), where the front door forwards what the E2B SDK sends a sandbox.
 */
export interface SandboxHost {
  /** For the API key named `apiKey` (service.apiKeys; undefined: the service token), which the sandbox then belongs to. */
  create(request: SandboxCreateRequest, apiKey?: string): Promise<Sandbox>;
  /**
   * Running and recently ended sandboxes: of every front door (`everywhere`, the distributed
   * mode asking the others), or of this one's worker only (`here`: a list another front door asked for).
   */
  list(scope?: 'everywhere' | 'here'): Promise<Sandbox[]>;
  describe(id: string): Promise<Sandbox>;
  /** Kills the sandbox `timeoutSeconds` from now. */
  setTimeout(id: string, timeoutSeconds: number): Promise<Sandbox>;
  kill(id: string): Promise<Sandbox>;
  /** What its processes use now (sandbox.ended once it has ended). */
  metrics(id: string): Promise<SandboxMetrics>;
  /** A running sandbox as its creator got it (its envd access token too); its timeout moved out to `timeoutSeconds` from now, never in. */
  connect(id: string, timeoutSeconds?: number): Promise<Sandbox>;
  /** Pauses it: what its backend keeps (its files, or its memory too) is kept, and it holds nothing on the host. */
  pause(id: string, request?: SandboxPauseRequest): Promise<Sandbox>;
  /** Resumes a paused sandbox under its id (a running one is left as it is: `resumed` false). */
  resume(id: string, timeoutSeconds?: number): Promise<{ sandbox: Sandbox; resumed: boolean }>;
  /** Copies of a running sandbox, each its own sandbox; the parent keeps running. */
  fork(id: string, request?: SandboxForkRequest): Promise<SandboxForkResult>;
  /** Keeps its state as a snapshot, a template for new sandboxes. */
  snapshot(id: string, request?: SnapshotCreateRequest): Promise<Snapshot>;
  listSnapshots(filter?: { sandbox_id?: string; name?: string }): Promise<Snapshot[]>;
  /** By id, a snapshot the key `apiKey` sees (undefined: the service token, which sees all); by name, the key's own. */
  deleteSnapshot(idOrName: string, apiKey?: string): Promise<Snapshot>;
  /** Runs a command to its end (its timeout and output caps a snippet's). */
  exec(id: string, request: SandboxExecRequest): Promise<SandboxExecResult>;
  /** Runs a cell in its code interpreter to its end (its timeout and output caps a snippet's). */
  runCode(id: string, request: SandboxRunCodeRequest): Promise<SandboxRunCodeResult>;
  /** A regular file's bytes; `path` absolute or relative to the sandbox user's home. */
  readFile(id: string, path: string): Promise<Buffer>;
  /** Writes a file (parents made, a file there replaced). */
  writeFile(id: string, path: string, content: Buffer): Promise<SandboxFileWritten>;
  /** The largest file readFile gives and writeFile takes (sandboxes.maxFileBytes). */
  maxFileBytes(): number;
  /** The unix socket the sandboxes' envd listens on; null while the worker process (re)starts. */
  envdSocket(): string | null;
  /** The unix socket bulk sync is served on (sandboxes/sync-server.ts), after this front door's auth; null while the worker (re)starts. */
  syncSocket(): string | null;
  /**
   * Hands a client's connection whose first request is for a sandbox here (by its host name) to
   * the process that serves the sandboxes' traffic, with the bytes read of it: that process
   * answers it from then on. False when it cannot now (the worker process (re)starts): the
   * connection is still the caller's. Absent where no other process serves that traffic.
   */
  takeConnection?(socket: Socket, head: Buffer): boolean;
  /**
   * Where this front door takes back, from that process, the requests on a connection handed
   * over that are not a sandbox's (the service's own routes, sent on the same connection): a unix
   * socket whose connections its HTTP server serves. With takeConnection.
   */
  takeBackAt?(socketPath: string): void;
  /**
   * Where a sandbox lives: this front door's worker (`here`, also for an id no one holds: it
   * answers not found), or, in the distributed mode, the front door at `address` that holds it.
   */
  placeOf(id: string): Promise<SandboxPlace>;
  /**
   * Volumes (docs/volumes.md), kept by this machine's worker: in the distributed mode a volume is
   * the machine's of the front door it was made through.
   */
  createVolume(request: VolumeCreateRequest, apiKey?: string): Promise<VolumeGranted>;
  listVolumes(apiKey?: string): Promise<Volume[]>;
  describeVolume(idOrName: string, apiKey?: string): Promise<VolumeGranted>;
  /** volume.in_use while running sandboxes mount it, unless `force`. */
  deleteVolume(idOrName: string, apiKey?: string, force?: boolean): Promise<Volume>;
}

export type SandboxPlace = { here: true } | { address: string };

/** No sandbox by that id (or none the asking API key may see). */
export function sandboxNotFound(id: string): CodedError {
  return new CodedError(contractError('sandbox.not_found', `no sandbox ${JSON.stringify(id)}`));
}

/** No snapshot by that id or name (or none the asking API key may see). */
export function snapshotNotFound(idOrName: string): CodedError {
  return new CodedError(contractError('snapshot.not_found', `no snapshot ${JSON.stringify(idOrName)}`));
}

/** An API key holds as many running sandboxes as it may (service.apiKeys.<name>.maxSandboxes). */
export function keyFullError(apiKey: string, cap: number): CodedError {
  return new CodedError(contractError('sandboxes.key_full', `API key ${apiKey} holds ${cap} running sandboxes, the most it may; kill one of them first`, { max: cap }));
}
