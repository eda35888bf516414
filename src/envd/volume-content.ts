import type { IncomingMessage, ServerResponse } from 'node:http';
import { posix } from 'node:path';
import type { AgentEntry, AgentUser } from '../contract/sandbox-agent.js';
import type { SandboxAgentPort } from '../sandboxes/agent-port.js';
import { runToEnd } from '../sandboxes/sandbox-exec.js';
import { VOLUME_CONTENT_ROOT } from '../sandboxes/sandbox-volumes.js';
import { Code, ConnectError } from '@connectrpc/connect';
import { agentCall, toConnectError } from './agent-errors.js';
import { sameSecret } from './access.js';
import { sendJson } from '../util/http-messages.js';
import { requestBody, sendFailure, sendFileBytes, sendJsonError, writeFile } from './files-route.js';

/** What the content API needs of the sandbox host's volumes (sandboxes/sandbox-volumes.ts). */
export interface VolumeContent {
  /** The token of volume `id`'s content API; undefined when there is none. */
  tokenOf(id: string): Promise<string | undefined>;
  /** `use` run with the agent of a sandbox that mounts the volume at VOLUME_CONTENT_ROOT. */
  withContent<T>(id: string, use: (agent: SandboxAgentPort) => Promise<T>): Promise<T>;
}

const ROUTE = /^\/volumecontent\/([^/]+)\/(path|dir|file)$/;
/** A chmod or chown of the content API: short, but bounded like any command. */
const METADATA_LIMITS = { timeoutMs: 10_000, maxStdoutBytes: 4096, maxStderrBytes: 4096 };
const MAX_PATCH_BYTES = 4096;
/** The ids a volume's files may have: what every sandbox maps (its user and its root). */
const KNOWN_IDS: Record<string, number> = { user: 1000, root: 0 };

export function isVolumeContentUrl(url: string): boolean {
  return url.startsWith('/volumecontent/');
}

/**
 * E2B's volume content API (spec/openapi-volumecontent.yml), the stock SDK's `Volume` file
 * operations without a sandbox of the caller's: `Authorization: Bearer <the volume's token>`,
 * `path` a path within the volume (`..` cannot leave it: paths are resolved from its top). Each
 * operation is done by the agent of a sandbox of the host's that mounts the volume, so links in
 * it lead nowhere but that sandbox.
 */
export async function handleVolumeContent(request: IncomingMessage, response: ServerResponse, volumes: VolumeContent): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://volumes');
  const route = ROUTE.exec(url.pathname);
  if (!route) return sendJsonError(response, 404, `no route ${url.pathname}`);
  const [, volumeId, kind] = route as unknown as [string, string, 'path' | 'dir' | 'file'];
  const token = await volumes.tokenOf(volumeId);
  if (token === undefined) return sendJsonError(response, 404, `volume ${volumeId} not found`);
  if (!hasBearer(request, token)) return sendJsonError(response, 401, 'the volume’s token is required (Authorization: Bearer)');
  const asked = url.searchParams.get('path');
  if (!asked) return sendJsonError(response, 400, 'the path query parameter is required');
  const path = posix.join(VOLUME_CONTENT_ROOT, posix.normalize(`/${asked}`));
  const operation = `${request.method ?? 'GET'} ${kind}`;
  try {
    await volumes.withContent(volumeId, (agent) => serve(operation, { request, response, url, agent, path }));
  } catch (error) {
    sendFailure(response, error);
  }
}

interface ContentRequest {
  request: IncomingMessage;
  response: ServerResponse;
  url: URL;
  agent: SandboxAgentPort;
  /** As the helper sandbox sees it: under VOLUME_CONTENT_ROOT. */
  path: string;
}

async function serve(operation: string, content: ContentRequest): Promise<void> {
  const { response, agent, path, url } = content;
  const user = userOf(url);
  switch (operation) {
    case 'GET path':
      return sendJson(response, 200, toVolumeEntry((await stat(agent, path)) ?? notFound(path)));
    case 'DELETE path': {
      if (path === VOLUME_CONTENT_ROOT) return sendJsonError(response, 400, 'the volume’s top cannot be removed');
      if (!(await stat(agent, path))) notFound(path);
      await agentCall(() => agent.request({ op: 'remove', path, user: 'root' }));
      response.writeHead(204).end();
      return;
    }
    case 'PATCH path':
      return sendJson(response, 200, toVolumeEntry(await changeMetadata(content)));
    case 'GET dir': {
      const depth = Number(url.searchParams.get('depth') ?? '1');
      if (!Number.isInteger(depth) || depth < 1) return sendJsonError(response, 400, 'depth is a whole number from 1');
      const { entries } = await agentCall(() => agent.request({ op: 'list_dir', path, depth, user: 'root' }));
      return sendJson(response, 200, entries.map(toVolumeEntry));
    }
    case 'POST dir': {
      const force = url.searchParams.get('force') === 'true';
      const existing = await stat(agent, path);
      if (existing && (!force || existing.type !== 'directory')) exists(path);
      if (!force) directoryOrMissing(await stat(agent, posix.dirname(path)), posix.dirname(path));
      const { entry } = await agentCall(() => agent.request({ op: 'mkdir', path, user }));
      return sendJson(response, 201, toVolumeEntry(await withMetadata(content, entry)));
    }
    case 'GET file': {
      const entry = await stat(agent, path);
      if (entry?.type !== 'file') notFound(path);
      return sendFileBytes(response, agent, entry, 'root');
    }
    case 'PUT file': {
      const existing = await stat(agent, path);
      if (existing && (existing.type !== 'file' || url.searchParams.get('force') !== 'true')) exists(path);
      if (!existing) directoryOrMissing(await stat(agent, posix.dirname(path)), path);
      const entry = await writeFile(agent, path, requestBody(content.request), user, undefined);
      return sendJson(response, 201, toVolumeEntry(await withMetadata(content, entry)));
    }
    default:
      return sendJsonError(response, 405, `${operation} is not an operation of the volume content API`);
  }
}

/** Whom a write acts as: the volume's root where `uid=0` is asked, else its user (uid 1000). */
function userOf(url: URL): AgentUser {
  return url.searchParams.get('uid') === '0' ? 'root' : 'user';
}

async function stat(agent: SandboxAgentPort, path: string): Promise<AgentEntry | undefined> {
  try {
    return (await agentCall(() => agent.request({ op: 'stat', path, user: 'root' }))).entry;
  } catch (error) {
    if (toConnectError(error).code === Code.NotFound) return undefined;
    throw error;
  }
}

/** The mode, owner and group the request's query asks of what it made. */
async function withMetadata(content: ContentRequest, entry: AgentEntry): Promise<AgentEntry> {
  const { url } = content;
  const asked = { mode: url.searchParams.get('mode'), uid: url.searchParams.get('uid'), gid: url.searchParams.get('gid') };
  if (asked.mode === null && asked.uid === null && asked.gid === null) return entry;
  return changed(content, { mode: numberOrNull(asked.mode), uid: numberOrNull(asked.uid), gid: numberOrNull(asked.gid) });
}

/** PATCH path: `{uid, gid, mode}`, each optional. */
async function changeMetadata(content: ContentRequest): Promise<AgentEntry> {
  const body = (await readJsonBody(content.request, MAX_PATCH_BYTES)) as { uid?: unknown; gid?: unknown; mode?: unknown } | null;
  if (body === null || typeof body !== 'object') throw invalidArgument('the body is a JSON object of uid, gid and mode');
  const asked = { uid: body.uid ?? null, gid: body.gid ?? null, mode: body.mode ?? null };
  for (const [name, value] of Object.entries(asked)) {
    if (value !== null && (!Number.isInteger(value) || (value as number) < 0)) throw invalidArgument(`${name} is a whole number`);
  }
  if (!(await stat(content.agent, content.path))) notFound(content.path);
  return changed(content, asked as { uid: number | null; gid: number | null; mode: number | null });
}

/** chmod and chown, run as the helper sandbox's root: only ids every sandbox maps (0 and 1000) can be given. */
async function changed(content: ContentRequest, asked: { uid: number | null; gid: number | null; mode: number | null }): Promise<AgentEntry> {
  const { agent, path } = content;
  for (const id of [asked.uid, asked.gid]) {
    if (id !== null && !Object.values(KNOWN_IDS).includes(id)) throw invalidArgument(`a volume's files belong to uid and gid 1000 (a sandbox's user) or 0 (its root), not ${id}`);
  }
  const commands: string[][] = [];
  if (asked.uid !== null || asked.gid !== null) commands.push(['/usr/bin/chown', '-h', `${asked.uid ?? ''}:${asked.gid ?? ''}`, '--', path]);
  if (asked.mode !== null) commands.push(['/usr/bin/chmod', (asked.mode & 0o7777).toString(8), '--', path]);
  for (const argv of commands) {
    const result = await runToEnd('volume', agent, { argv, user: 'root' }, METADATA_LIMITS, new AbortController().signal);
    if (result.exit_code !== 0) throw invalidArgument(result.stderr.trim() || `${argv[0]} failed`);
  }
  return (await stat(agent, path)) ?? notFound(path);
}

function numberOrNull(text: string | null): number | null {
  if (text === null) return null;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) throw invalidArgument(`${text} is not a whole number`);
  return value;
}

/** E2B's VolumeEntryStat: the path within the volume; one time (the agent's mtime) for all three. */
function toVolumeEntry(entry: AgentEntry) {
  const time = new Date(entry.modified_ms).toISOString();
  return {
    name: entry.path === VOLUME_CONTENT_ROOT ? '' : entry.name,
    type: entry.type === 'other' ? 'unknown' : entry.type,
    path: relative(entry.path),
    size: entry.size,
    mode: entry.mode,
    uid: idOf(entry.owner),
    gid: idOf(entry.group),
    atime: time,
    mtime: time,
    ctime: time,
    ...(entry.symlink_target !== undefined && { target: entry.symlink_target }),
  };
}

function idOf(name: string): number {
  return KNOWN_IDS[name] ?? (/^\d+$/.test(name) ? Number(name) : 65534);
}

function relative(path: string): string {
  return path === VOLUME_CONTENT_ROOT ? '/' : path.slice(VOLUME_CONTENT_ROOT.length);
}

function hasBearer(request: IncomingMessage, token: string): boolean {
  const header = request.headers.authorization ?? '';
  return header.startsWith('Bearer ') && sameSecret(header.slice(7), token);
}

/** A parent that must be a directory: not found when it is missing or anything else, as E2B answers. */
function directoryOrMissing(parent: AgentEntry | undefined, path: string): void {
  if (parent?.type !== 'directory') notFound(path);
}

function exists(path: string): never {
  throw new ConnectError(`path ${relative(path)} already exists`, Code.AlreadyExists);
}

function notFound(path: string): never {
  throw new ConnectError(`path ${relative(path)} not found`, Code.NotFound);
}

function invalidArgument(message: string): ConnectError {
  return new ConnectError(message, Code.InvalidArgument);
}

/** A small JSON body, at most `limit` bytes; null when it is not JSON. */
async function readJsonBody(request: IncomingMessage, limit: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > limit) throw invalidArgument(`the body is over ${limit} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    return null;
  }
}
