import type { Session, SessionCreateRequest, SessionExecRequest, SessionExecResult, SessionFileWritten } from '../contract/session.js';

/**
 * Where sessions live, as whoever routes to them sees it: every operation by session id, each
 * failing with a CodedError (session.not_found, session.ended, session.lost, ...). The HTTP
 * routes hold one: the worker process's sessions (embedded), or a router that finds the front
 * door whose worker holds the id (cluster).
 */
export interface SessionHost {
  create(request: SessionCreateRequest): Promise<Session>;
  /** The sessions this host holds, live and recently ended. */
  list(): Promise<Session[]>;
  describe(id: string): Promise<Session>;
  exec(id: string, request: SessionExecRequest): Promise<SessionExecResult>;
  writeFile(id: string, path: string, content: Buffer): Promise<SessionFileWritten>;
  readFile(id: string, path: string): Promise<Buffer>;
  remove(id: string): Promise<Session>;
}
