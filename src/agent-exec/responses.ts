import type { AgentExecResponse, ErrorResponse } from '../contract/agent-exec.js';
import { AGENT_EXEC_SCHEMA_RELEASE } from '../contract/agent-exec-version.js';
import { AgentExecError } from './errors.js';

export type SuccessResponse = Exclude<AgentExecResponse, ErrorResponse>;
type ResponseType = SuccessResponse['type'];

/** The response whose `type` admits T: run and restart share one shape. */
type Admitting<R, T> = R extends { type: infer Admitted } ? (T extends Admitted ? R : never) : never;
type ResponseOf<T extends ResponseType> = Admitting<SuccessResponse, T>;

/** What a command fills in: everything but the envelope. */
export type ResponseBody<T extends ResponseType> = Omit<ResponseOf<T>, 'schema_version' | 'ok' | 'type'>;

export function success<T extends ResponseType>(type: T, body: ResponseBody<T>): ResponseOf<T> {
  return { schema_version: AGENT_EXEC_SCHEMA_RELEASE.version, ok: true, type, ...body } as ResponseOf<T>;
}

export function errorResponse(error: unknown): ErrorResponse {
  const known = error instanceof AgentExecError;
  return {
    schema_version: AGENT_EXEC_SCHEMA_RELEASE.version,
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
