/**
 * The stable error codes of agent-exec's error responses. Agents branch on these, so a code
 * is never renamed; a new failure gets a new code.
 */
export type ErrorCode =
  'invalid_argument' | 'job_not_found' | 'ambiguous_job_id' | 'job_unreadable' | 'invalid_state' | 'command_not_found' | 'sandbox_unavailable' | 'launch_failed' | 'internal_error';

/** A failure agent-exec expected and can name; anything else is reported as internal_error. */
export class AgentExecError extends Error {
  readonly retryable: boolean;
  /** Exit status 2 (the request itself was malformed) rather than 1. */
  readonly usage: boolean;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: { retryable?: boolean; usage?: boolean } = {},
  ) {
    super(message);
    this.name = 'AgentExecError';
    this.retryable = options.retryable ?? false;
    this.usage = options.usage ?? false;
  }
}

export function usageError(message: string): AgentExecError {
  return new AgentExecError('invalid_argument', message, { usage: true });
}
