import { randomUUID } from 'node:crypto';
import { canonicalHash } from '../contract/canonical-json.js';
import { contractError, type ContractError } from '../contract/errors.js';
import { JOB_ID_PATTERN, type Artifact, type CapturedStream, type RunJobResult, type SkippedEntry, type TerminalStatus } from '../contract/run-job.js';
import { usageOf } from '../contract/usage.js';
import { withinNesting } from '../contract/validate.js';
import type { SandboxOutcome } from '../isolation/types.js';
import { treeHash } from '../workspace/tree-hash.js';
import type { NormalisedJob } from './job-admission.js';
import { interruptionError, interruptionOf, interruptionStatus, type Interruption } from './outcome.js';

const EMPTY_STREAM_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** What the result records of a command that ran: its outcome, its output, a failure to log it. */
export type Executed = SandboxOutcome & { stdout: CapturedStream; stderr: CapturedStream; ioError: Error | null };

const INTERRUPTION_MESSAGES: Readonly<Record<Interruption, string>> = {
  canceled: 'the job was canceled; its process tree was killed',
  timed_out: 'the command exceeded timeout_ms; its process tree was killed',
  out_of_memory: 'the command exceeded its memory limit and was killed',
};

/**
 * The command decides the status; an artifact shortfall is reported alongside (status stays
 * `completed`, error `policy.artifact_denied`), a failed artifact read makes the run `failed`.
 */
export function statusOf(outcome: Executed, collected: { error: ContractError | null }): [TerminalStatus, ContractError | null, Executed] {
  const interruption = interruptionOf(outcome);
  if (interruption) return [interruptionStatus(interruption), interruptionError(interruption, INTERRUPTION_MESSAGES[interruption]), outcome];
  if (outcome.ioError) return ['failed', contractError('run.io_failed', `writing the output logs failed: ${outcome.ioError.message}`), outcome];
  if (outcome.exitCode !== 0)
    return ['failed', contractError('run.exit_nonzero', `the command exited with status ${outcome.exitCode ?? outcome.signal}`, { exit_code: outcome.exitCode }), outcome];
  if (collected.error?.code === 'run.artifact_collection_failed') return ['failed', collected.error, outcome];
  return ['completed', collected.error, outcome];
}

/** Assembles the result as the run progresses, so any early exit still returns a whole record. */
export class ResultBuilder {
  job: NormalisedJob | null = null;
  workspace: RunJobResult['workspace'] & { sha256: string } = { files: 0, bytes: 0, skipped: [] as SkippedEntry[], sha256: treeHash([]) };
  artifacts: Artifact[] = [];
  artifactsSkipped: SkippedEntry[] = [];
  policyRule = 'not evaluated';
  private decision: 'allowed' | 'denied' = 'allowed';
  private readonly startedAt = new Date();
  private jobId: string;
  private readonly trace: Record<string, unknown>;

  /** Started on the raw request: a result names its job and echoes its trace even when the request does not validate. */
  constructor(request: unknown) {
    this.jobId = idOf(request);
    this.trace = traceOf(request);
  }

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
