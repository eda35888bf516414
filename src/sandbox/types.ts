/**
 * What a sandbox is made of, fixed before it starts. Paths in argv/cwd are sandbox paths.
 * Two templates that serialise alike can share warm, pre-started sandboxes.
 */
export interface SandboxTemplate {
  argv: readonly string[];
  cwd: string;
  env: Readonly<Record<string, string>>;
  /** Host paths made visible inside the sandbox (toolchains, a compiler's output dir). */
  mounts: readonly Mount[];
  /** Per-job files, created empty and mounted read-only; their content is written just before start. */
  files: readonly StagedFile[];
  /**
   * Sandbox path of a writable work directory the backend creates empty for each sandbox,
   * owned by the job's uid; the caller fills it before start and reads it after.
   */
  workDir?: string;
  /** Size of the work directory: as root it is a tmpfs of this size, so filling it fails in the job only. */
  workDirBytes?: number;
  limits: ResourceLimits;
  network: 'none' | 'host';
}

export interface Mount {
  host: string;
  sandbox: string;
  writable: boolean;
}

export interface StagedFile {
  name: string;
  sandboxPath: string;
  executable: boolean;
}

/**
 * How memory is bounded. `address-space` (RLIMIT_AS) makes allocation fail inside the program,
 * which is what gives python its MemoryError; runtimes that reserve large virtual ranges
 * (V8, Go) cannot start under it and are bounded by the cgroup instead.
 */
export type MemoryMechanism = 'address-space' | 'cgroup';

export interface ResourceLimits {
  memoryBytes: number;
  memoryMechanism: MemoryMechanism;
  maxProcesses: number;
  maxOpenFiles: number;
  maxFileBytes: number;
  /** CPU bandwidth in cores, enforced by the cgroup cpu controller where the host has one. */
  cpuCores?: number;
}

/** Receives a stream's bytes as they arrive; decides itself what to keep. */
export interface OutputSink {
  write(chunk: Buffer): void;
}

export interface SandboxIO {
  timeoutMs: number;
  stdout: OutputSink;
  stderr: OutputSink;
  stdin?: Buffer | string;
  /** Aborting kills the whole process tree, as a timeout does. */
  signal?: AbortSignal;
}

export interface SandboxOutcome {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  aborted: boolean;
  /** The kernel's OOM killer acted inside the job's memory cgroup. */
  oomKilled: boolean;
  /** From start (release) to exit. */
  durationMs: number;
}

/** A sandbox whose namespaces and mounts exist, waiting for its files and the go-ahead. */
export interface PreparedSandbox {
  /** The host uid the job runs as and that owns its writable mounts (null: ours). */
  readonly ownerUid: number | null;
  /** Host path of the template's work directory, or null when it has none. */
  readonly workDirHost: string | null;
  writeFile(name: string, content: string | Buffer): Promise<void>;
  copyFile(name: string, hostSource: string): Promise<void>;
  /** Runs the job to completion; never leaves a process behind. */
  start(io: SandboxIO): Promise<SandboxOutcome>;
  /** Gives the sandbox up without running it. */
  discard(): void;
  /** The caller is done with the work directory (artifacts read); it may now be deleted. */
  release(): void;
}

export interface BackendStatus {
  name: string;
  available: boolean;
  /** Why it is unavailable, or what it degrades to (e.g. rlimits without cgroups). */
  notes: string[];
  /** How resource limits are enforced on this host. */
  resourceControl: 'cgroup-v1' | 'cgroup-v2' | 'rlimits-only';
}

export interface SandboxBackend {
  readonly name: string;
  status(): Promise<BackendStatus>;
  /** Rejects with SandboxUnavailableError when no sandbox can be made here. */
  prepare(template: SandboxTemplate): Promise<PreparedSandbox>;
  /** Kills warm sandboxes; running jobs finish. */
  dispose(): Promise<void>;
}

export class SandboxUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxUnavailableError';
  }
}
