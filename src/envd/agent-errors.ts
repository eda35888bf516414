import { Code, ConnectError } from '@connectrpc/connect';
import { AgentOperationError, SandboxGoneError } from '../sandboxes/agent-port.js';
import type { AgentErrorCode } from '../contract/sandbox-agent.js';

/**
 * The Connect code of each agent failure, chosen as E2B's envd answers the same case so that the
 * SDK raises the same error (envd/rpc.ts: not_found -> NotFoundError or FileNotFoundError,
 * invalid_argument -> InvalidArgumentError, already_exists lets makeDir answer false). envd
 * answers a path of the wrong kind (a file to ListDir, a directory to download) as invalid.
 */
const CODE_OF: Record<AgentErrorCode, Code> = {
  not_found: Code.NotFound,
  exists: Code.AlreadyExists,
  not_a_directory: Code.InvalidArgument,
  is_a_directory: Code.InvalidArgument,
  permission_denied: Code.PermissionDenied,
  invalid: Code.InvalidArgument,
  not_regular: Code.InvalidArgument,
  no_space: Code.ResourceExhausted,
  no_such_process: Code.NotFound,
  // Said of a port's connection, which envd's RPCs never make.
  refused: Code.InvalidArgument,
  too_large: Code.ResourceExhausted,
  // envd names no root: never said to it.
  path_escape: Code.InvalidArgument,
  busy: Code.ResourceExhausted,
  failed: Code.Internal,
};

/** An error of the agent port as the Connect error envd would answer; anything unexpected is internal. */
export function toConnectError(error: unknown): ConnectError {
  if (error instanceof ConnectError) return error;
  // The agent's failure rides along as the cause: /files answers some of them more precisely (507).
  if (error instanceof AgentOperationError) return new ConnectError(error.message, CODE_OF[error.code], undefined, undefined, error);
  // The SDK turns unavailable into "the sandbox probably timed out", which is what happened.
  if (error instanceof SandboxGoneError) return new ConnectError(error.message, Code.Unavailable);
  return new ConnectError(error instanceof Error ? error.message : String(error), Code.Internal);
}

/** Runs one agent call, failing with the Connect error envd would answer. */
export async function agentCall<T>(call: () => Promise<T> | T): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw toConnectError(error);
  }
}

/**
 * The HTTP status of a Connect code on envd's REST routes (/files): the statuses envd.yaml
 * names, which the SDK maps by status (envd/api.ts). A gone sandbox answers 502, as E2B's proxy
 * answers for a sandbox it no longer has, which the SDK reports as a sandbox timeout.
 */
const HTTP_STATUS_OF: Partial<Record<Code, number>> = {
  [Code.InvalidArgument]: 400,
  [Code.Unauthenticated]: 401,
  [Code.PermissionDenied]: 403,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.ResourceExhausted]: 429,
  [Code.Unavailable]: 502,
};

export function httpStatusOf(error: ConnectError): number {
  // envd answers a write to a full disk 507, which the SDK raises as NotEnoughSpaceError.
  if (error.cause instanceof AgentOperationError && error.cause.code === 'no_space') return 507;
  return HTTP_STATUS_OF[error.code] ?? 500;
}
