import { mkdir } from 'node:fs/promises';
import type { ContractError } from '../contract/errors.js';
import type { RunJobResult, TerminalStatus } from '../contract/run-job.js';
import { normaliseJob } from './job-admission.js';
import { RunJobExecution, type ExecutionHooks } from './job-execution.js';
import { ResultBuilder } from './job-result.js';
import { withRuntime, type RunnerRuntime } from './runtime.js';
import { StateRuns } from './state-runs.js';
import { checkSentWorkspace } from './sent-workspace.js';
import type { Caller } from './workspace-path.js';

export interface RunJobOptions extends ExecutionHooks {
  /** The runtime to run on; without one, a runtime made for this call from the environment's configuration (runtime.ts: withRuntime). */
  runtime?: RunnerRuntime;
  /** Where this run's logs and artifacts are kept (default: <stateDir>/runs/<job_id>, with its result.json, under the configured retention: state-runs.ts). */
  runDir?: string;
  /**
   * Who asked (workspace-path.ts): `remote` (the HTTP service's worker) may snapshot only under
   * `runJob.workspaceRoots`; `local` (default: the CLI, the library) any host directory. Both
   * refuse the pseudo filesystems and the service's own directories.
   */
  caller?: Caller;
}

/**
 * Runs one RunJobRequest to a RunJobResult. Never throws: a bad request, a denial or a broken
 * sandbox is a result with a status and a stable error code.
 */
export function runJob(request: unknown, options: RunJobOptions = {}): Promise<RunJobResult> {
  return withRuntime(options.runtime, (runtime) => runOn(runtime, request, options));
}

async function runOn(runtime: RunnerRuntime, request: unknown, options: RunJobOptions): Promise<RunJobResult> {
  const builder = new ResultBuilder(request);
  const normalised = normaliseJob(request, runtime, options.caller ?? 'local');
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
  runtime: RunnerRuntime,
  caller: Caller = 'local',
): Promise<{ jobId: string; traceId: string | undefined; backendKind: string } | { error: ContractError }> {
  const normalised = normaliseJob(request, runtime, caller);
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
export function unrunResult(request: unknown, status: TerminalStatus, error: ContractError, runtime: RunnerRuntime): RunJobResult {
  const builder = new ResultBuilder(request);
  const normalised = normaliseJob(request, runtime, null);
  if (!('error' in normalised)) builder.adopt(normalised);
  return builder.finish(status, error);
}
