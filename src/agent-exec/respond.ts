import { exitAfterFlush, printJson } from '../util/stdio.js';
import { AgentExecError } from './errors.js';
import { errorResponse, exitCodeFor, type SuccessResponse } from './responses.js';

/**
 * Wraps a command's action so that it prints exactly one JSON object, success or error, and
 * exits with 0, 1 (an expected failure) or 2 (a malformed request). Diagnostics go to stderr.
 */
export function respond<A extends unknown[]>(action: (...args: A) => Promise<SuccessResponse>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      printJson(await action(...args));
      exitAfterFlush(0);
    } catch (error) {
      const detail = error instanceof AgentExecError ? error.message : ((error as Error).stack ?? String(error));
      process.stderr.write(`agent-exec: ${detail}\n`);
      printJson(errorResponse(error));
      exitAfterFlush(exitCodeFor(error));
    }
  };
}
