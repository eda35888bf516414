import { mkdir, rm } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { contractError, type ContractError } from '../contract/errors.js';
import type { Artifact, CapturedStream, RunJobResult } from '../contract/run-job.js';
import { checkCommand } from '../policy/command.js';
import { execRulesFor } from '../policy/exec-rules.js';
import { findShellUse } from '../policy/shell-rule.js';
import { LogFile, teeSinks } from '../isolation/log-file.js';
import { CappedCapture } from '../isolation/output-capture.js';
import { SANDBOX_SEARCH_PATH } from '../isolation/profiles.js';
import type { PreparedSandbox } from '../isolation/types.js';
import { SentWorkspaceError } from '../workspace/sent-workspace.js';
import { SnapshotError } from '../workspace/snapshot.js';
import { treeHash } from '../workspace/tree-hash.js';
import type { NormalisedJob } from './job-admission.js';
import { statusOf, type Executed, type ResultBuilder } from './job-result.js';
import { LiveOutput, type OutputListener } from './live-output.js';
import { setupFailure } from './outcome.js';
import type { RunnerRuntime } from './runtime.js';
import { MaterialisedWorkspace } from './sent-workspace.js';

/** What a caller hears of a run as it goes, and how it stops one. */
export interface ExecutionHooks {
  /** Aborting cancels: the whole tree is killed and the status is `canceled`. */
  signal?: AbortSignal;
  /** Called when the command is about to start (after policy and snapshot). */
  onRunning?: () => void;
  /** Receives the output as it is written, within the bytes the result keeps (live-output.ts). */
  onOutput?: OutputListener;
}

const WORK_DIR = '/workspace';

/**
 * One admitted job, from the policy that needs nothing but the request, through the sandbox,
 * the workspace import, the command's own policy and the run, to its artifacts. Every way out
 * finishes the result; the sandbox is released (ran) or discarded (never started).
 */
export class RunJobExecution {
  constructor(
    private readonly runtime: RunnerRuntime,
    private readonly job: NormalisedJob,
    private readonly builder: ResultBuilder,
    private readonly options: ExecutionHooks,
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
      // Awaited: the job has not ended until its work dir is deleted and its blocks the host's again.
      if (started) await sandbox?.release();
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

  private async execute(sandbox: PreparedSandbox, runDir: string): Promise<Executed> {
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
