/** What a sandbox backend is asked to run. Paths in argv/cwd are paths inside the sandbox. */
export interface SandboxSpec {
  argv: readonly string[];
  cwd: string;
  env: Readonly<Record<string, string>>;
  /** Host paths made visible inside the sandbox. */
  mounts: readonly Mount[];
  limits: SandboxLimits;
  network: 'none' | 'host';
  stdin?: Buffer | string;
  stdout: OutputSink;
  stderr: OutputSink;
  /** Aborting kills the whole process tree, as a timeout does. */
  signal?: AbortSignal;
}

export interface Mount {
  host: string;
  sandbox: string;
  writable: boolean;
}

/**
 * How memory is bounded. `address-space` (RLIMIT_AS) makes allocation fail inside the program,
 * which is what gives python its MemoryError; runtimes that reserve large virtual ranges
 * (V8, Go) cannot start under it and are bounded by the cgroup instead.
 */
export type MemoryMechanism = 'address-space' | 'cgroup';

export interface SandboxLimits {
  timeoutMs: number;
  memoryBytes: number;
  memoryMechanism: MemoryMechanism;
  maxProcesses: number;
  maxOpenFiles: number;
  maxFileBytes: number;
}

/** Receives a stream's bytes as they arrive; decides itself what to keep. */
export interface OutputSink {
  write(chunk: Buffer): void;
}

export interface SandboxOutcome {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  aborted: boolean;
  /** The kernel's OOM killer acted inside the job's memory cgroup. */
  oomKilled: boolean;
  durationMs: number;
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
  /** Runs one job to completion; never leaves a process behind. Rejects only if the sandbox could not start. */
  run(spec: SandboxSpec): Promise<SandboxOutcome>;
}

export class SandboxUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxUnavailableError';
  }
}
