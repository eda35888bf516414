import { resolveExecutable } from './command-path.js';
import { AgentExecError, usageError } from './errors.js';
import { within } from './workspace-sandbox.js';

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
