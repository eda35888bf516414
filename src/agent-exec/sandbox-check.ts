import { canonicalKind, type BackendKind } from '../contract/backend-kinds.js';
import { resolveExecutable } from '../isolation/command-path.js';
import { within } from '../isolation/bubblewrap/workspace-profile.js';
import { AgentExecError, usageError } from './errors.js';

/**
 * The backend kind a job asked for, by the names every face shares. Only local_process builds
 * the workspace profile (the host read-only, the cwd writable); any other kind is refused,
 * never run elsewhere. (The local backend's own checks follow in checkSandboxAvailable.)
 */
export async function checkBackend(requested: string): Promise<BackendKind> {
  const kind = canonicalKind(requested);
  // As every face answers a kind no backend has: unavailable here, like a kind that cannot run.
  if (kind === null) {
    throw new AgentExecError(
      'sandbox_unavailable',
      `unknown backend kind ${JSON.stringify(requested)}; known kinds: local_process (bubblewrap), gvisor, microvm (firecracker). The job was not run.`,
    );
  }
  if (kind === 'local_process') return kind;
  throw new AgentExecError(
    'sandbox_unavailable',
    `the ${kind} backend cannot run agent-exec jobs: it does not build the workspace profile (the host's files, read-only, around a writable cwd). The job was not run.`,
  );
}

/**
 * Fails closed: a job asked to run in the workspace sandbox runs there or not at all.
 * Returns the bwrap to use.
 */
export function checkSandboxAvailable(bwrap: string | null, cwd: string, root: string): string {
  const usable = bwrap === null ? null : resolveExecutable(bwrap, undefined, '/', () => true);
  if (usable === null) {
    throw new AgentExecError(
      'sandbox_unavailable',
      `bubblewrap was not found${bwrap === null ? ' on PATH' : ` at ${bwrap}`}: install it (apt-get install bubblewrap), set AGENT_EXEC_BWRAP, or choose --sandbox none. The job was not run.`,
    );
  }
  if (cwd === '/') throw usageError('the workspace sandbox makes --cwd writable: / would be the whole host');
  if (within(cwd, root)) throw usageError(`--cwd ${cwd} is inside agent-exec's own root ${root}, which jobs must not see`);
  return usable;
}
