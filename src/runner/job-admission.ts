import { randomUUID } from 'node:crypto';
import { posix } from 'node:path';
import { argvProblem, environmentProblem } from '../contract/command-limits.js';
import { contractError, type ContractError } from '../contract/errors.js';
import { RunJobRequestSchema, type CommandRule, type NetworkPolicy, type RunJobRequest } from '../contract/run-job.js';
import { validate } from '../contract/validate.js';
import type { SandboxNetwork } from '../isolation/types.js';
import type { RunJobLimitValues } from './config.js';
import { admitNetwork } from './network-admission.js';
import type { RunnerRuntime } from './runtime.js';
import { admitSecrets } from './secret-admission.js';
import { admitWorkspacePath, type Caller } from './workspace-path.js';

/** The effective request: defaults applied, ceilings checked. What replay hashes cover. */
export interface NormalisedJob {
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
 * Validates a request and applies this runtime's defaults and ceilings: the schema, the limits,
 * the cwd and artifact globs, the network and the secrets, and a local_path workspace for this
 * caller. `caller` null: a job that will not run (its result only), so its workspace path is not
 * checked.
 */
export function normaliseJob(request: unknown, runtime: RunnerRuntime, caller: Caller | null): NormalisedJob | { error: ContractError } {
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
  // What exec and bubblewrap take (contract/command-limits.ts): a job admitted is one that can start.
  for (const [field, problem] of [
    ['command.argv', argvProblem(value.command.argv, 'command.argv')],
    ['command.env', environmentProblem(value.command.env ?? {}, 'command.env')],
  ] as const) {
    if (problem !== undefined) return { error: contractError('validation.invalid_request', problem, { field }) };
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
