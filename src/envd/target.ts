import { posix } from 'node:path';
import type { Duplex } from 'node:stream';
import { Code, ConnectError, createContextKey, type HandlerContext } from '@connectrpc/connect';
import type { AgentUser } from '../contract/sandbox-agent.js';
import type { SandboxAgentPort } from '../sandboxes/agent-port.js';

/** What envd needs of one live sandbox: its agent, and what E2B's envd was told at /init. */
export interface EnvdTarget {
  agent: SandboxAgentPort;
  /** E2B's envdAccessToken: when set, every request but /health must prove it (X-Access-Token or a signed /files URL). */
  accessToken: string | null;
  /** The default working directory and the base of relative paths, e.g. /home/user. */
  home: string;
  /** Whether the sandbox has a root of its own: then root's requests start in root's home; otherwise they act as the user. */
  rootInside: boolean;
  /** The user a request runs as when it names none (E2B's `user`). */
  defaultUser: AgentUser;
  /** The sandbox's python: its code interpreter's kernels run on it. */
  python: string;
  /** The name of the API key that made the sandbox (service.apiKeys); undefined: the service token. */
  apiKey?: string;
  /** E2B's `allowPublicTraffic: false`: the token every request to the sandbox's own ports must carry (`e2b-traffic-access-token`); null: public. */
  trafficToken: string | null;
  /** E2B's `maskRequestHost`: the Host header its ports' servers see (`${PORT}` the port); null: the client's. */
  maskRequestHost: string | null;
  /**
   * A connection to a port of its loopback made by the host itself (rejects with PortClosedError
   * when nothing listens there); absent, or null, where only its agent can make one.
   */
  connectPort?: (port: number) => Promise<Duplex> | null;
}

/** The sandbox of an id, as the sandbox host knows it; undefined when it has none of that id (ended or never created). */
export type EnvdLookup = (sandboxId: string) => EnvdTarget | undefined;

/** The sandboxes envd serves, as the sandbox host gives them. */
export interface EnvdSandboxes {
  lookup: EnvdLookup;
  /** The ids of the running sandboxes (a signed URL's sandbox is the one whose token signed it). */
  runningIds(): Iterable<string>;
  /** Resumes a paused sandbox that is resumed by requests (auto_resume); true when it runs now. */
  wake(sandboxId: string): Promise<boolean>;
}

/** Whom one request is for: resolved and authenticated by the server before any handler runs. */
export interface EnvdCaller {
  sandboxId: string;
  target: EnvdTarget;
  user: AgentUser;
}

export const callerKey = createContextKey<EnvdCaller | undefined>(undefined, { description: 'the sandbox and user of an envd request' });

export function callerOf(context: HandlerContext): EnvdCaller {
  const caller = context.values.get(callerKey);
  // The server resolves every request before routing it: a handler without a caller is a wiring bug.
  if (!caller) throw new ConnectError('the request reached a handler without a sandbox', Code.Internal);
  return caller;
}

/** Root's home in a sandbox, as E2B's envd finds it in the sandbox's passwd. */
const ROOT_HOME = '/root';

/** Where a request's user's `~` and relative paths start, and its processes by default: the sandbox's home for the user, /root for root. */
export function homeOf(target: EnvdTarget, user: AgentUser): string {
  return user === 'root' && target.rootInside ? ROOT_HOME : target.home;
}

/**
 * A path of a request as E2B's envd reads it: absolute, `~/...`, or relative to the user's home.
 * The agent resolves a relative path against its own home, the sandbox's: one of root's is made
 * absolute here.
 */
export function userPath(path: string, target: EnvdTarget, user: AgentUser): string {
  const home = homeOf(target, user);
  const expanded = expandHome(path, home);
  return home === target.home || expanded === '' || posix.isAbsolute(expanded) ? expanded : posix.join(home, expanded);
}

/** E2B's envd expands a leading `~` to the user's home. */
function expandHome(path: string, home: string): string {
  if (path === '~') return home;
  return path.startsWith('~/') ? `${home}${path.slice(1)}` : path;
}
