import { availableParallelism, homedir } from 'node:os';
import { join } from 'node:path';

const MiB = 1024 * 1024;

/** Every default and ceiling in one place; README "Configuration" mirrors this file. */
export interface RunnerConfig {
  /** Compile cache, toolchain mirrors, job staging. Must be reachable by unprivileged uids. */
  stateDir: string;
  snippet: SnippetLimits;
  runJob: RunJobConfig;
  /** Jobs run at once by a guest runner or the service (default: number of cores). */
  concurrency: number;
}

export interface SnippetLimits {
  defaultTimeoutSeconds: number;
  maxTimeoutSeconds: number;
  compileTimeoutSeconds: number;
  memoryBytes: number;
  compileMemoryBytes: number;
  maxProcesses: number;
  compileMaxProcesses: number;
  maxOpenFiles: number;
  maxFileBytes: number;
  maxStdoutBytes: number;
  maxStderrBytes: number;
  /** CPU bandwidth of a snippet, in cores (compilers get every core). */
  cpuCores: number;
}

export const DEFAULT_SNIPPET_LIMITS: SnippetLimits = {
  defaultTimeoutSeconds: 10,
  maxTimeoutSeconds: 300,
  compileTimeoutSeconds: 60,
  memoryBytes: 512 * MiB,
  compileMemoryBytes: 1024 * MiB,
  maxProcesses: 64,
  // The go tool and rustc are heavily threaded; threads count against pids.
  compileMaxProcesses: 256,
  maxOpenFiles: 256,
  maxFileBytes: 10 * MiB,
  maxStdoutBytes: 1 * MiB,
  maxStderrBytes: 1 * MiB,
  cpuCores: 1,
};

/** Each run-job limit: its default, and the ceiling a request may not exceed. */
export interface RunJobConfig {
  defaults: RunJobLimitValues;
  ceilings: RunJobLimitValues;
  maxWorkspaceFiles: number;
  maxWorkspaceBytes: number;
  /** Size of a job's work dir (a tmpfs when running as root): snapshot plus what the job writes. */
  workDirBytes: number;
  /** Full stdout/stderr logs on disk stop growing here (counting and hashing go on). */
  maxLogBytes: number;
  /** Whether a request may ask for `network: "allow"`. */
  allowNetwork: boolean;
  maxOpenFiles: number;
  maxFileBytes: number;
  /** CPU bandwidth of a run job, in cores. */
  cpuCores: number;
}

export interface RunJobLimitValues {
  timeout_ms: number;
  max_stdout_bytes: number;
  max_stderr_bytes: number;
  max_artifact_bytes: number;
  max_artifacts: number;
  max_record_bytes: number;
  memory_bytes: number;
  max_processes: number;
}

export const DEFAULT_RUN_JOB_CONFIG: RunJobConfig = {
  defaults: {
    timeout_ms: 60_000,
    max_stdout_bytes: 1 * MiB,
    max_stderr_bytes: 1 * MiB,
    max_artifact_bytes: 100 * MiB,
    max_artifacts: 100,
    max_record_bytes: 4 * MiB,
    memory_bytes: 1024 * MiB,
    max_processes: 256,
  },
  ceilings: {
    timeout_ms: 30 * 60_000,
    max_stdout_bytes: 64 * MiB,
    max_stderr_bytes: 64 * MiB,
    max_artifact_bytes: 1024 * MiB,
    max_artifacts: 10_000,
    max_record_bytes: 256 * MiB,
    memory_bytes: 8192 * MiB,
    max_processes: 4096,
  },
  maxWorkspaceFiles: 200_000,
  maxWorkspaceBytes: 2048 * MiB,
  workDirBytes: 4096 * MiB,
  maxLogBytes: 256 * MiB,
  allowNetwork: true,
  maxOpenFiles: 4096,
  maxFileBytes: 1024 * MiB,
  cpuCores: availableParallelism(),
};

export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.AGENT_RUNNER_STATE_DIR) return env.AGENT_RUNNER_STATE_DIR;
  if (process.getuid?.() === 0) return '/var/lib/agent-runner';
  return join(env.XDG_STATE_HOME ?? join(homedir(), '.local', 'state'), 'agent-runner');
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<RunnerConfig> = {}): RunnerConfig {
  const number = (name: string, fallback: number) => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(raw)}`);
    return value;
  };
  return {
    stateDir: defaultStateDir(env),
    concurrency: number('AGENT_RUNNER_CONCURRENCY', availableParallelism()),
    ...overrides,
    runJob: { ...DEFAULT_RUN_JOB_CONFIG, ...overrides.runJob },
    snippet: {
      ...DEFAULT_SNIPPET_LIMITS,
      memoryBytes: number('AGENT_RUNNER_MEMORY_MB', DEFAULT_SNIPPET_LIMITS.memoryBytes / MiB) * MiB,
      maxTimeoutSeconds: number('AGENT_RUNNER_MAX_TIMEOUT_SECONDS', DEFAULT_SNIPPET_LIMITS.maxTimeoutSeconds),
      ...overrides.snippet,
    },
  };
}
