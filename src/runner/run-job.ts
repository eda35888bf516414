import { randomUUID } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { canonicalHash } from '../contract/canonical-json.js';
import { contractError, type ContractError } from '../contract/errors.js';
import {
  JOB_ID_PATTERN,
  RunJobRequestSchema,
  type Artifact,
  type CommandRule,
  type CapturedStream,
  type NetworkPolicy,
  type RunJobRequest,
  type RunJobResult,
  type SkippedEntry,
  type TerminalStatus,
} from '../contract/run-job.js';
import { usageOf } from '../contract/usage.js';
import { validate, withinNesting } from '../contract/validate.js';
import { checkCommand } from '../policy/command.js';
import { execRulesFor } from '../policy/exec-rules.js';
import { findShellUse } from '../policy/shell-rule.js';
import { LogFile, teeSinks } from '../sandbox/log-file.js';
import { CappedCapture } from '../sandbox/output-capture.js';
import { SANDBOX_SEARCH_PATH } from '../sandbox/profiles.js';
import { admitNetwork } from './network-admission.js';
import { admitSecrets } from './secret-admission.js';
import type { PreparedSandbox, SandboxNetwork, SandboxOutcome } from '../sandbox/types.js';
import { SentWorkspaceError } from '../workspace/sent-workspace.js';
import { SnapshotError } from '../workspace/snapshot.js';
import { treeHash } from '../workspace/tree-hash.js';
import type { RunJobLimitValues } from './config.js';
import { LiveOutput, type OutputListener } from './live-output.js';
import { interruptionError, interruptionOf, interruptionStatus, setupFailure, type Interruption } from './outcome.js';
import { RunnerRuntime } from './runtime.js';
import { StateRuns } from './state-runs.js';
import { checkSentWorkspace, MaterialisedWorkspace } from './sent-workspace.js';
import { admitWorkspacePath, type Caller } from './workspace-path.js';

export interface RunJobOptions {
  runtime?: RunnerRuntime;
  /** Aborting cancels: the whole tree is killed and the status is `canceled`. */
  signal?: AbortSignal;
  /** Where this run's logs and artifacts are kept (default: <stateDir>/runs/<job_id>, with its result.json, under the configured retention: state-runs.ts). */
  runDir?: string;
  /** Called when the command is about to start (after policy and snapshot). */
  onRunning?: () => void;
  /** Receives the output as it is written, within the bytes the result keeps (live-output.ts). */
  onOutput?: OutputListener;
  /**
   * Who asked (workspace-path.ts): `remote` (the HTTP service's worker) may snapshot only under
   * `runJob.workspaceRoots`; `local` (default: the CLI, the library) any host directory. Both
   * refuse the pseudo filesystems and the service's own directories.
   */
  caller?: Caller;
}

const WORK_DIR = '/workspace';
const EMPTY_STREAM_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** The effective request: defaults applied, ceilings checked. What replay hashes cover. */
interface NormalisedJob {
  jobId: string;
  trace: Record<string, unknown>;
  request: RunJobRequest;
  /** A local_path workspace's host directory, links resolved, once admitted (null: none, or one sent in the request). */
  workspacePath: string | null;
  cwd: string;
  env: Record<string, string>;
  /** Each secret's name and the placeholder the job sees for it (secret-admission.ts). */
  secretPlaceholders: Record<string, string>;
  limits: RunJobLimitValues;
  policy: { allowed_commands: CommandRule[] | null; allowed_env: string[]; allow_shell: boolean; network: NetworkPolicy };
  /** The network the sandbox gives the job, its allowlist parsed. */
  network: SandboxNetwork;
  /** Canonical; a name no backend has as requested, which the registry refuses (backend.unavailable). */
  backendKind: string;
}

/**
 * Runs one RunJobRequest to a RunJobResult. Never throws: a bad request, a denial or a broken
 * sandbox is a result with a status and a stable error code.
 */
export async function runJob(request: unknown, options: RunJobOptions = {}): Promise<RunJobResult> {
  const runtime = options.runtime ?? RunnerRuntime.shared();
  const startedAt = new Date();
  const builder = new ResultBuilder(startedAt, idOf(request), traceOf(request));
  const normalised = normalise(request, runtime, options.caller ?? 'local');
  if ('error' in normalised) return builder.finish('failed', normalised.error);
  builder.adopt(normalised);
  const given = options.runDir;
  if (given !== undefined) return new RunJobExecution(runtime, normalised, builder, options, () => privateDir(given)).run();
  const runs = new StateRuns(runtime.config);
  const result = await new RunJobExecution(runtime, normalised, builder, options, () => runs.open(normalised.jobId)).run();
  await runs.keep(result);
  return result;
}

/** A run dir holds the job's logs and artifacts: private to our user. */
async function privateDir(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/**
 * Checks a request as runJob would before running it (schema, ceilings, cwd, artifact globs,
 * network, the workspace path for this caller, a sent workspace read whole against its caps),
 * for a front door that must answer 422 at once. Returns the job id it would run under.
 */
export async function admitRunJob(
  request: unknown,
  runtime: RunnerRuntime = RunnerRuntime.shared(),
  caller: Caller = 'local',
): Promise<{ jobId: string; traceId: string | undefined; backendKind: string } | { error: ContractError }> {
  const normalised = normalise(request, runtime, caller);
  if ('error' in normalised) return normalised;
  const { workspace } = normalised.request;
  if (workspace && workspace.source !== 'local_path') {
    const refused = await checkSentWorkspace(workspace, runtime.config.runJob);
    if (refused) return { error: refused };
  }
  const traceId = normalised.trace.trace_id;
  return { jobId: normalised.jobId, traceId: typeof traceId === 'string' ? traceId : undefined, backendKind: normalised.backendKind };
}

/** A whole result for a job that never ran (canceled while queued, interrupted by a restart). */
export function unrunResult(request: unknown, status: TerminalStatus, error: ContractError, runtime: RunnerRuntime = RunnerRuntime.shared()): RunJobResult {
  const builder = new ResultBuilder(new Date(), idOf(request), traceOf(request));
  const normalised = normalise(request, runtime, null);
  if (!('error' in normalised)) builder.adopt(normalised);
  return builder.finish(status, error);
}

/** `caller` null: a job that will not run (its result only), so its workspace path is not checked. */
function normalise(request: unknown, runtime: RunnerRuntime, caller: Caller | null): NormalisedJob | { error: ContractError } {
  const checked = validate(RunJobRequestSchema, request);
  if (!checked.ok) return { error: contractError('validation.invalid_request', checked.message, { field: checked.field }) };
  const value = checked.value;
  const config = runtime.config.runJob;
  const limits = { ...config.defaults, ...value.limits };
  for (const [name, ceiling] of Object.entries(config.ceilings) as Array<[keyof RunJobLimitValues, number]>) {
    if (limits[name] > ceiling) {
      return { error: contractError('validation.invalid_request', `limits.${name} must be at most ${ceiling}, got ${limits[name]}`, { field: `limits.${name}` }) };
    }
  }
  const cwd = posix.normalize(value.command.cwd ?? '.');
  if (posix.isAbsolute(cwd) || cwd === '..' || cwd.startsWith('../')) {
    return { error: contractError('validation.path_escape', `command.cwd ${JSON.stringify(value.command.cwd)} leaves the workspace`, { field: 'command.cwd' }) };
  }
  const escaping = (value.artifacts ?? []).find((pattern) => pattern.startsWith('/') || pattern.split('/').includes('..'));
  if (escaping !== undefined) {
    return {
      error: contractError('validation.path_escape', `artifact glob ${JSON.stringify(escaping)} leaves the work dir (absolute, or a .. segment)`, {
        field: 'artifacts',
        pattern: escaping,
      }),
    };
  }
  const network = value.policy?.network ?? 'none';
  const admittedNetwork = admitNetwork(network, config.allowNetwork, 'policy.network');
  if (admittedNetwork !== 'none' && 'error' in admittedNetwork) return admittedNetwork;
  const env = value.command.env ?? {};
  const secrets = admitSecrets(value.secrets, admittedNetwork, env);
  if ('error' in secrets) return secrets;
  let workspacePath: string | null = null;
  // A workspace sent in the request names no host path: any caller may send one.
  if (value.workspace?.source === 'local_path' && caller !== null) {
    const admitted = admitWorkspacePath(value.workspace.path, caller, runtime.config);
    if ('error' in admitted) return admitted;
    workspacePath = admitted.hostPath;
  }
  return {
    jobId: value.job_id ?? `job_${randomUUID()}`,
    trace: value.trace ?? {},
    request: value,
    workspacePath,
    cwd,
    env,
    secretPlaceholders: secrets.placeholders,
    limits,
    policy: {
      allowed_commands: value.policy?.allowed_commands ?? null,
      allowed_env: value.policy?.allowed_env ?? [],
      allow_shell: value.policy?.allow_shell ?? false,
      network,
    },
    network: secrets.network,
    backendKind: runtime.backends.kindOf(value.backend?.kind),
  };
}

class RunJobExecution {
  constructor(
    private readonly runtime: RunnerRuntime,
    private readonly job: NormalisedJob,
    private readonly builder: ResultBuilder,
    private readonly options: RunJobOptions,
    /** Creates the run dir and says where it is, once the run gets that far. */
    private readonly openRunDir: () => Promise<string>,
  ) {}

  async run(): Promise<RunJobResult> {
    const { job, builder } = this;
    const denied = this.staticPolicy();
    if (denied) return builder.finish('policy_denied', denied);

    let sandbox: PreparedSandbox | undefined;
    let sent: MaterialisedWorkspace | undefined;
    let started = false;
    try {
      const runDir = await this.openRunDir();
      // A workspace sent in the request is written out (and judged) before any sandbox is taken.
      const { workspace } = job.request;
      if (workspace && workspace.source !== 'local_path') {
        try {
          sent = await MaterialisedWorkspace.create(workspace, this.runtime.config.runJob, this.runtime.stagingDir);
        } catch (error) {
          if (error instanceof SentWorkspaceError) return builder.finish('failed', error.error);
          throw error;
        }
      }
      // The sandbox (perhaps pre-started) comes first: the snapshot is copied into its work dir.
      sandbox = await this.prepareSandbox();
      const snapshot = await this.importWorkspace(sandbox, sent?.dir ?? job.workspacePath);
      // Copied into the work dir: the written-out one is no longer needed.
      await sent?.dispose();
      sent = undefined;
      if ('error' in snapshot) return builder.finish('setup_failed', snapshot.error);
      builder.workspace = snapshot;

      const argv0 = job.request.command.argv[0]!;
      const resolved = await sandbox.resolveCommand(argv0, { searchPath: SANDBOX_SEARCH_PATH, cwd: posix.join(WORK_DIR, job.cwd) });
      const decision = await checkCommand(argv0, job.policy.allowed_commands ?? undefined, resolved);
      builder.policyRule = decision.rule;
      if (!decision.allowed) return builder.finish('policy_denied', contractError('policy.command_denied', decision.message, decision.details));
      if (!resolved) return builder.finish('failed', contractError('run.spawn_failed', `command not found or not executable: ${argv0}`, { argv0 }));
      const unusablePath = await this.checkRequestPath(sandbox, argv0);
      if (unusablePath) return builder.finish('setup_failed', unusablePath);
      await sandbox.restrictExec(await execRulesFor(job.policy, { program: resolved.sandboxPath, commands: [resolved] }, sandbox, posix.join(WORK_DIR, job.cwd)));

      started = true;
      const outcome = await this.execute(sandbox, runDir);
      const collected = await this.collect(sandbox, runDir);
      return builder.finish(...statusOf(outcome, collected));
    } catch (error) {
      const failure = setupFailure(error);
      return builder.finish(failure.status, failure.error);
    } finally {
      if (started) sandbox?.release();
      else sandbox?.discard();
      // A tree that cannot be removed now is reaped by a worker started after this process ends (named after our pid).
      await sent?.dispose().catch(() => undefined);
    }
  }

  /** Checks that need nothing but the request: env keys, shells. */
  private staticPolicy(): ContractError | null {
    const { job, builder } = this;
    const deniedKeys = Object.keys(job.env).filter((key) => !job.policy.allowed_env.includes(key));
    if (deniedKeys.length > 0) {
      builder.deny('allowed_env');
      return contractError('policy.env_denied', `env keys not allowed by policy: ${deniedKeys.join(', ')}`, { keys: deniedKeys });
    }
    const shell = job.policy.allow_shell ? null : findShellUse(job.request.command.argv);
    if (shell) {
      builder.deny('allow_shell');
      return contractError('policy.shell_denied', `${shell.reason}; set policy.allow_shell to permit it`, { argv0: job.request.command.argv[0], program: shell.program });
    }
    return null;
  }

  private async prepareSandbox(): Promise<PreparedSandbox> {
    const { job } = this;
    const config = this.runtime.config.runJob;
    const backend = this.runtime.backends.get(job.backendKind);
    await this.runtime.backends.whenPrepared(backend, job.limits.timeout_ms);
    return backend.prepare({
      profile: 'run-job',
      argv: job.request.command.argv,
      cwd: posix.join(WORK_DIR, job.cwd),
      env: { ...job.env, ...job.secretPlaceholders },
      mounts: [],
      files: [],
      workDir: WORK_DIR,
      workDirBytes: config.workDirBytes,
      network: job.network,
      guardExec: true,
      withoutShells: !job.policy.allow_shell,
      limits: {
        memoryBytes: job.limits.memory_bytes,
        memoryMechanism: 'cgroup',
        maxProcesses: job.limits.max_processes,
        maxOpenFiles: config.maxOpenFiles,
        maxFileBytes: config.maxFileBytes,
        cpuCores: config.cpuCores,
      },
    });
  }

  /**
   * The snapshot, then the cwd: it must be a directory of the snapshot (the work dir itself,
   * `.`, always is). A cwd that is missing, a file, or reached through a link is a set-up
   * failure, never created: a request naming a directory its workspace lacks is a mistake to
   * report, not to paper over with an empty directory.
   */
  private async importWorkspace(sandbox: PreparedSandbox, hostPath: string | null): Promise<(RunJobResult['workspace'] & { sha256: string }) | { error: ContractError }> {
    const { workspace } = this.job.request;
    let report: RunJobResult['workspace'] & { sha256: string } = { files: 0, bytes: 0, skipped: [], sha256: treeHash([]) };
    if (workspace) {
      const config = this.runtime.config.runJob;
      // A local_path admitted and resolved by normalise() (the directory checked is the one
      // copied), or where a sent workspace was written out: imported alike, hashed alike.
      const source = hostPath ?? (workspace.source === 'local_path' ? workspace.path : null);
      if (source === null) throw new Error('a workspace sent in the request was not written out');
      try {
        report = await sandbox.importWorkspace({
          hostPath: source,
          ...(workspace.include ? { include: workspace.include } : {}),
          ...(workspace.exclude ? { exclude: workspace.exclude } : {}),
          maxFiles: config.maxWorkspaceFiles,
          maxBytes: config.maxWorkspaceBytes,
        });
      } catch (error) {
        if (error instanceof SnapshotError) return { error: contractError('backend.setup_failed', error.message) };
        throw error;
      }
    }
    const cwd = this.job.cwd;
    if (cwd !== '.') {
      const kind = await sandbox.statWorkPath(cwd);
      if (kind === 'missing')
        return {
          error: contractError(
            'backend.setup_failed',
            `command.cwd ${JSON.stringify(cwd)} does not exist in the ${workspace ? 'workspace snapshot' : 'work dir (no workspace was given)'}`,
            { field: 'command.cwd' },
          ),
        };
      if (kind === 'file')
        return { error: contractError('backend.setup_failed', `command.cwd ${JSON.stringify(cwd)} is not a directory of the snapshot: it is a file`, { field: 'command.cwd' }) };
      if (kind !== 'directory') {
        return {
          error: contractError(
            'backend.setup_failed',
            `command.cwd ${JSON.stringify(cwd)} is, or passes through, a link or not a directory (links are never followed to reach the cwd)`,
            { field: 'command.cwd' },
          ),
        };
      }
    }
    return report;
  }

  /**
   * A PATH in the request's env is what the job's exec and its children search: when argv[0] is
   * a bare name that cannot be found on it, the job could not start as asked. That is a set-up
   * failure with the reason, not the command's own non-zero exit.
   */
  private async checkRequestPath(sandbox: PreparedSandbox, argv0: string): Promise<ContractError | null> {
    const requestPath = this.job.env.PATH;
    if (requestPath === undefined || argv0.includes('/')) return null;
    const searchPath = requestPath.split(':');
    const found = await sandbox.resolveCommand(argv0, { searchPath, cwd: posix.join(WORK_DIR, this.job.cwd) });
    if (found) return null;
    return contractError(
      'backend.setup_failed',
      `argv[0] ${JSON.stringify(argv0)} is not found on the request's PATH ${JSON.stringify(requestPath)} (only absolute directories are searched)`,
      {
        field: 'command.env.PATH',
        argv0,
      },
    );
  }

  private async execute(sandbox: PreparedSandbox, runDir: string): Promise<SandboxOutcome & { stdout: CapturedStream; stderr: CapturedStream; ioError: Error | null }> {
    const { limits } = this.job;
    const maxLog = this.runtime.config.runJob.maxLogBytes;
    const stdout = new CappedCapture(limits.max_stdout_bytes, { sha256: true });
    const stderr = new CappedCapture(limits.max_stderr_bytes, { sha256: true });
    const stdoutLog = new LogFile(join(runDir, 'stdout.log'), maxLog);
    const stderrLog = new LogFile(join(runDir, 'stderr.log'), maxLog);
    const { onOutput } = this.options;
    const live = (stream: 'stdout' | 'stderr', maxBytes: number) => (onOutput ? [new LiveOutput(stream, maxBytes, onOutput)] : []);
    this.options.onRunning?.();
    const outcome = await sandbox.start({
      timeoutMs: limits.timeout_ms,
      stdout: teeSinks(stdout, stdoutLog, ...live('stdout', limits.max_stdout_bytes)),
      stderr: teeSinks(stderr, stderrLog, ...live('stderr', limits.max_stderr_bytes)),
      ...(this.options.signal ? { signal: this.options.signal } : {}),
    });
    const ioError = await Promise.all([stdoutLog.close(), stderrLog.close()]).then(
      () => null,
      (error: Error) => error,
    );
    return { ...outcome, stdout: describeStream(stdout), stderr: describeStream(stderr), ioError };
  }

  private async collect(sandbox: PreparedSandbox, runDir: string): Promise<{ artifacts: Artifact[]; error: ContractError | null }> {
    const patterns = this.job.request.artifacts ?? [];
    const storeDir = join(runDir, 'artifacts');
    try {
      await rm(storeDir, { recursive: true, force: true });
      await mkdir(storeDir, { mode: 0o700 });
      const { artifacts, denied, skipped } = await sandbox.collectArtifacts({
        patterns,
        storeDir,
        maxArtifacts: this.job.limits.max_artifacts,
        maxArtifactBytes: this.job.limits.max_artifact_bytes,
        maxEntriesVisited: this.runtime.config.runJob.maxWorkspaceFiles,
      });
      this.builder.artifacts = artifacts;
      this.builder.artifactsSkipped = skipped;
      const error = denied.length === 0 ? null : contractError('policy.artifact_denied', `${denied.length} matching artifact(s) not collected: limits reached`, { denied });
      return { artifacts, error };
    } catch (error) {
      return { artifacts: [], error: contractError('run.artifact_collection_failed', (error as Error).message) };
    }
  }
}

function describeStream(capture: CappedCapture): CapturedStream {
  return { text: capture.text(), truncated: capture.truncated, observed_bytes: capture.observedBytes, sha256: capture.sha256() };
}

type Executed = SandboxOutcome & { stdout: CapturedStream; stderr: CapturedStream; ioError: Error | null };

/**
 * The command decides the status; an artifact shortfall is reported alongside (status stays
 * `completed`, error `policy.artifact_denied`), a failed artifact read makes the run `failed`.
 */
const INTERRUPTION_MESSAGES: Readonly<Record<Interruption, string>> = {
  canceled: 'the job was canceled; its process tree was killed',
  timed_out: 'the command exceeded timeout_ms; its process tree was killed',
  out_of_memory: 'the command exceeded its memory limit and was killed',
};

function statusOf(outcome: Executed, collected: { error: ContractError | null }): [TerminalStatus, ContractError | null, Executed] {
  const interruption = interruptionOf(outcome);
  if (interruption) return [interruptionStatus(interruption), interruptionError(interruption, INTERRUPTION_MESSAGES[interruption]), outcome];
  if (outcome.ioError) return ['failed', contractError('run.io_failed', `writing the output logs failed: ${outcome.ioError.message}`), outcome];
  if (outcome.exitCode !== 0)
    return ['failed', contractError('run.exit_nonzero', `the command exited with status ${outcome.exitCode ?? outcome.signal}`, { exit_code: outcome.exitCode }), outcome];
  if (collected.error?.code === 'run.artifact_collection_failed') return ['failed', collected.error, outcome];
  return ['completed', collected.error, outcome];
}

/** Assembles the result as the run progresses, so any early exit still returns a whole record. */
class ResultBuilder {
  job: NormalisedJob | null = null;
  workspace: RunJobResult['workspace'] & { sha256: string } = { files: 0, bytes: 0, skipped: [] as SkippedEntry[], sha256: treeHash([]) };
  artifacts: Artifact[] = [];
  artifactsSkipped: SkippedEntry[] = [];
  policyRule = 'not evaluated';
  private decision: 'allowed' | 'denied' = 'allowed';

  constructor(
    private readonly startedAt: Date,
    private jobId: string,
    private readonly trace: Record<string, unknown>,
  ) {}

  adopt(job: NormalisedJob): void {
    this.job = job;
    this.jobId = job.jobId;
  }

  deny(rule: string): void {
    this.decision = 'denied';
    this.policyRule = rule;
  }

  finish(status: TerminalStatus, error: ContractError | null, executed?: Executed): RunJobResult {
    if (status === 'policy_denied') this.decision = 'denied';
    const finishedAt = new Date();
    const empty: CapturedStream = { text: '', truncated: false, observed_bytes: 0, sha256: EMPTY_STREAM_SHA256 };
    const job = this.job;
    const result: RunJobResult = {
      job_id: this.jobId,
      trace: this.trace,
      status,
      backend: { kind: job?.backendKind ?? 'local_process' },
      command: { argv: job?.request.command.argv ?? [], cwd: job?.cwd ?? '.' },
      exit_code: executed?.exitCode ?? null,
      signal: executed?.timedOut || executed?.aborted ? 'SIGKILL' : (executed?.signal ?? null),
      stdout: executed?.stdout ?? empty,
      stderr: executed?.stderr ?? empty,
      artifacts: this.artifacts,
      artifacts_skipped: this.artifactsSkipped,
      workspace: { files: this.workspace.files, bytes: this.workspace.bytes, skipped: this.workspace.skipped },
      replay: {
        request_sha256: job ? canonicalHash(replayableRequest(job)) : '',
        workspace_sha256: this.workspace.sha256,
        result_sha256: '',
      },
      policy: {
        decision: this.decision,
        rule: this.policyRule,
        policy_version: job ? canonicalHash(job.policy) : '',
      },
      ...(error ? { error } : {}),
      started_at: this.startedAt.toISOString(),
      finished_at: finishedAt.toISOString(),
      duration_ms: Math.max(0, finishedAt.getTime() - this.startedAt.getTime()),
      usage: executed ? usageOf(executed) : { wall_ms: 0, cpu_user_ms: null, cpu_system_ms: null, peak_memory_bytes: null },
    };
    result.replay.result_sha256 = canonicalHash({
      status: result.status,
      exit_code: result.exit_code,
      stdout: { sha256: result.stdout.sha256, observed_bytes: result.stdout.observed_bytes },
      stderr: { sha256: result.stderr.sha256, observed_bytes: result.stderr.observed_bytes },
      artifacts: result.artifacts.map(({ path, size, sha256 }) => ({ path, size, sha256 })),
      error_code: result.error?.code ?? null,
    });
    return fitRecord(result, job?.limits.max_record_bytes ?? Number.POSITIVE_INFINITY);
  }
}

/** What makes two runs the same request: everything but the job's identity and metadata. */
function replayableRequest(job: NormalisedJob): unknown {
  const { job_id: _id, trace: _trace, ...rest } = job.request;
  return { ...rest, command: { ...rest.command, cwd: job.cwd, env: job.env }, limits: job.limits, policy: job.policy, backend: { kind: job.backendKind } };
}

/** Shrinks the kept output (never the hashes or counts) until the record fits its cap. */
function fitRecord(result: RunJobResult, maxRecordBytes: number): RunJobResult {
  let size = Buffer.byteLength(JSON.stringify(result));
  while (size > maxRecordBytes && (result.stdout.text.length > 0 || result.stderr.text.length > 0)) {
    const longer = result.stdout.text.length >= result.stderr.text.length ? result.stdout : result.stderr;
    longer.text = longer.text.slice(0, Math.floor(longer.text.length / 2));
    longer.truncated = true;
    size = Buffer.byteLength(JSON.stringify(result));
  }
  return result;
}

function idOf(request: unknown): string {
  const given = request !== null && typeof request === 'object' ? (request as Record<string, unknown>).job_id : undefined;
  return typeof given === 'string' && new RegExp(JOB_ID_PATTERN).test(given) ? given : `job_${randomUUID()}`;
}

function traceOf(request: unknown): Record<string, unknown> {
  const trace = request !== null && typeof request === 'object' ? (request as Record<string, unknown>).trace : undefined;
  // A trace too deep to validate is not echoed either: the result must stay storable.
  return trace !== null && typeof trace === 'object' && !Array.isArray(trace) && withinNesting(trace) ? (trace as Record<string, unknown>) : {};
}
