import { AgentExecError, type ErrorCode } from './errors.js';

/** The response schema version every stdout object carries (schemas/agent-exec-response.schema.json). */
const SCHEMA_VERSION = '0.1';

export type ResponseType = 'run' | 'restart' | 'status' | 'tail' | 'wait' | 'kill' | 'list' | 'schema';

export interface ErrorResponse {
  schema_version: typeof SCHEMA_VERSION;
  ok: false;
  type: 'error';
  error: { code: ErrorCode; message: string; retryable: boolean };
}

export type SuccessResponse = { schema_version: typeof SCHEMA_VERSION; ok: true; type: ResponseType } & Record<string, unknown>;

export function success(type: ResponseType, body: Record<string, unknown>): SuccessResponse {
  return { schema_version: SCHEMA_VERSION, ok: true, type, ...body };
}

export function errorResponse(error: unknown): ErrorResponse {
  const known = error instanceof AgentExecError;
  return {
    schema_version: SCHEMA_VERSION,
    ok: false,
    type: 'error',
    error: {
      code: known ? error.code : 'internal_error',
      message: error instanceof Error ? error.message : String(error),
      retryable: known ? error.retryable : false,
    },
  };
}

/** 0 success, 1 an expected failure (unknown job, no sandbox...), 2 a malformed request. */
export function exitCodeFor(error: unknown): 1 | 2 {
  return error instanceof AgentExecError && error.usage ? 2 : 1;
}
