import { CodedError, contractError } from '../contract/errors.js';
import type { Session, SessionCreateRequest, SessionExecRequest, SessionExecResult, SessionFileWritten } from '../contract/session.js';

/**
 * Where sessions live, as whoever routes to them sees it: every operation by session id, each
 * failing with a CodedError (session.not_found, session.ended, session.lost, ...). The HTTP
 * routes hold one: the worker process's sessions (embedded), or a router that finds the front
 * door whose worker holds the id (cluster).
 */
export interface SessionHost {
  /** For the API key named `apiKey` (service.apiKeys; undefined: the service token), which the session then belongs to. */
  create(request: SessionCreateRequest, apiKey?: string): Promise<Session>;
  /** The sessions this host holds, live and recently ended. */
  list(): Promise<Session[]>;
  describe(id: string): Promise<Session>;
  exec(id: string, request: SessionExecRequest): Promise<SessionExecResult>;
  writeFile(id: string, path: string, content: Buffer): Promise<SessionFileWritten>;
  readFile(id: string, path: string): Promise<Buffer>;
  remove(id: string): Promise<Session>;
}

/** No session by that id (or none the asking API key may see). */
export function sessionNotFound(id: string): CodedError {
  return new CodedError(contractError('session.not_found', `no session ${JSON.stringify(id)}`));
}
