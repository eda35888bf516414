import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { AGENT_USERS, type AgentUser } from '../contract/sandbox-agent.js';

/** The users E2B's SDKs name. */
const KNOWN_USERS: ReadonlySet<string> = new Set<AgentUser>(AGENT_USERS);

/** Equal in time independent of where the strings differ (and of their lengths, both being hashed first). */
export function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** Whether the request carries the sandbox's access token in X-Access-Token (E2B's envdAccessToken). */
export function hasAccessToken(headers: IncomingHttpHeaders, accessToken: string): boolean {
  const given = headers['x-access-token'];
  return typeof given === 'string' && sameSecret(given, accessToken);
}

/**
 * Whether a request to a sandbox's other ports (the code interpreter) carries its token: as
 * X-Access-Token (what the SDK sends with a cell) or E2B-Traffic-Access-Token (with a context
 * call), the sandbox's trafficAccessToken being its access token here.
 */
export function hasTrafficToken(headers: IncomingHttpHeaders, accessToken: string): boolean {
  return hasAccessToken(headers, accessToken) || carriesTrafficToken(headers, accessToken);
}

/** Whether the request carries `token` as E2B-Traffic-Access-Token (what E2B's proxy asks of a private sandbox's ports). */
export function carriesTrafficToken(headers: IncomingHttpHeaders, token: string): boolean {
  const given = headers['e2b-traffic-access-token'];
  return typeof given === 'string' && sameSecret(given, token);
}

/** The user of `Authorization: Basic base64("<user>:")`, as the SDK sends it when a call names one. */
export function basicAuthUser(headers: IncomingHttpHeaders): string | undefined {
  const match = /^Basic\s+(\S+)$/i.exec(headers.authorization ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? decoded : decoded.slice(0, colon);
}

/** The user a request runs as: the one it names, else the sandbox's default; undefined when it names one the sandbox lacks. */
export function requestUser(named: string | undefined, defaultUser: AgentUser): AgentUser | undefined {
  if (named === undefined || named === '') return defaultUser;
  return KNOWN_USERS.has(named) ? (named as AgentUser) : undefined;
}

export interface FileSignature {
  path: string;
  operation: 'read' | 'write';
  /** The `username` query parameter, '' when absent (the default user). */
  username: string;
  signature: string | undefined;
  expiration: string | undefined;
}

/**
 * Checks a signed /files URL as envd does (api/auth.go, the SDK's sandbox/signature.ts):
 * `v1_` + base64(sha256("path:operation:user:token[:expiration]")) without padding, compared in
 * constant time, and refused once `signature_expiration` (unix seconds) has passed.
 * Returns why it is refused, or undefined when it is good.
 */
export function signatureProblem(signed: FileSignature, accessToken: string, nowMs = Date.now()): string | undefined {
  if (signed.signature === undefined) return 'missing signature query parameter';
  if (signed.expiration !== undefined && !/^-?\d+$/.test(signed.expiration)) return 'invalid signature expiration';
  if (!isSignedWith(signed, accessToken)) return 'invalid signature';
  if (signed.expiration !== undefined && Number(signed.expiration) < Math.floor(nowMs / 1000)) return 'signature is already expired';
  return undefined;
}

/** Whether `signed` was made with `accessToken`, its expiry aside. */
export function isSignedWith(signed: FileSignature, accessToken: string): boolean {
  if (signed.signature === undefined) return false;
  const parts = [signed.path, signed.operation, signed.username, accessToken];
  if (signed.expiration !== undefined) parts.push(signed.expiration);
  const expected = `v1_${createHash('sha256').update(parts.join(':'), 'utf8').digest('base64').replace(/=+$/, '')}`;
  return sameSecret(signed.signature, expected);
}

/** The signature a /files URL carries, as its query gives it (`operation` from its method). */
export function fileSignatureOf(url: URL, operation: 'read' | 'write'): FileSignature {
  const query = (name: string) => url.searchParams.get(name) ?? undefined;
  return { path: query('path') ?? '', operation, username: query('username') ?? '', signature: query('signature'), expiration: query('signature_expiration') };
}
