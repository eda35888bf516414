import { AgentRunnerClient } from '../client/client.js';
import { AgentRunnerError } from '../client/types.js';
import { CodedError, contractError, ERROR_CODES, type ErrorCode } from '../contract/errors.js';
import type { SessionHost } from '../sessions/session-host.js';
import type { Owners } from './owners.js';

/**
 * The sessions of the distributed mode, as one front door's routes see them. A session lives
 * in the worker process of the front door that made it (`local` there); that front door records
 * itself as the session's owner, and any other forwards the session's calls to it over HTTP,
 * with the service token (the front doors of one cluster share it). An owner that does not
 * answer took the session with it: 410 session.lost.
 */
/** What is asked of the one front door that holds a session. */
type HeldSessionCalls = Omit<SessionHost, 'create' | 'list'>;

export class ClusterSessions implements SessionHost {
  private readonly remotes = new Map<string, HeldSessionCalls>();

  constructor(
    private readonly local: SessionHost,
    private readonly owners: Owners,
    /** This front door's address as the others reach it; known once it listens. */
    private readonly self: () => string,
    private readonly token: string | null,
  ) {}

  async create(request: Parameters<SessionHost['create']>[0], apiKey?: string) {
    const session = await this.local.create(request, apiKey);
    try {
      await this.owners.record(session.id, this.self());
    } catch (error) {
      // Unrecorded, it would answer here only: end it rather than hand out a half-reachable id.
      await this.local.remove(session.id).catch(() => undefined);
      throw error;
    }
    return session;
  }

  /** The sessions this front door's worker holds. */
  list() {
    return this.local.list();
  }

  describe(id: string) {
    return this.route(id, (host) => host.describe(id));
  }

  exec(id: string, request: Parameters<SessionHost['exec']>[1]) {
    return this.route(id, (host) => host.exec(id, request));
  }

  writeFile(id: string, path: string, content: Buffer) {
    return this.route(id, (host) => host.writeFile(id, path, content));
  }

  readFile(id: string, path: string) {
    return this.route(id, (host) => host.readFile(id, path));
  }

  remove(id: string) {
    return this.route(id, (host) => host.remove(id));
  }

  private async route<R>(id: string, call: (host: HeldSessionCalls) => Promise<R>): Promise<R> {
    const owner = await this.owners.ownerOf(id);
    // Unknown to the cluster: the local worker answers session.not_found.
    if (owner === null || owner === this.self()) return call(this.local);
    let remote = this.remotes.get(owner);
    if (!remote) this.remotes.set(owner, (remote = forwardedTo(owner, this.token)));
    return call(remote);
  }
}

/** The session routes of another front door, answered as if here: its error codes and statuses, or session.lost when it does not answer. */
function forwardedTo(address: string, token: string | null): HeldSessionCalls {
  const client = new AgentRunnerClient({ url: address, ...(token === null ? {} : { token }) });
  const relay = async <R>(call: () => Promise<R>): Promise<R> => {
    try {
      return await call();
    } catch (error) {
      if (error instanceof AgentRunnerError && error.code in ERROR_CODES) {
        const details = error.details as Record<string, unknown> | undefined;
        throw new CodedError(contractError(error.code as ErrorCode, error.reason, details), { http_status: error.status });
      }
      if (error instanceof AgentRunnerError) throw error;
      throw new CodedError(contractError('session.lost', `the front door that held the session (${address}) does not answer: ${(error as Error).message}; create another session`));
    }
  };
  return {
    describe: (id) => relay(() => client.session(id)),
    exec: (id, request) => relay(() => client.sessionExec(id, request)),
    writeFile: (id, path, content) => relay(() => client.putSessionFile(id, path, content)),
    readFile: (id, path) => relay(() => client.getSessionFile(id, path)),
    remove: (id) => relay(() => client.endSession(id)),
  };
}
