import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { PassThrough, type Readable } from 'node:stream';
import { createGunzip, createGzip } from 'node:zlib';
import { CodedError, contractError, type ContractError } from '../contract/errors.js';
import { ERROR_CODES } from '../contract/errors.js';
import type { SandboxAgentPort } from './agent-port.js';
import { sendJson } from '../util/http-messages.js';
import { AgentOperationError } from './agent-port.js';
import { syncIn, syncOptionsOf, syncOut, type SyncOptions } from './tree-sync.js';
import { MAX_SYNC_TIMEOUT_SECONDS } from '../contract/tree-sync.js';

/** Where a sync's tree is: a running sandbox's agent, or a volume's (through its helper sandbox). */
export interface SyncTargets {
  /** `use` with the agent of running sandbox `id` (Sandboxes.withAgent: sandbox.not_found, sandbox.ended). */
  withSandbox<T>(id: string, use: (agent: SandboxAgentPort) => Promise<T>): Promise<T>;
  withVolume<T>(id: string, use: (agent: SandboxAgentPort) => Promise<T>): Promise<T>;
  /** The default of max_bytes: the largest file a sandbox may write times the files' default. */
  maxFileBytes: number;
}

/** The trailer a sync out ends with: its SyncReport as JSON. */
export const SYNC_REPORT_TRAILER = 'x-agent-runner-sync';
const ROUTE = /^\/v1\/(sandboxes|volumes)\/([^/]+)\/sync$/;
const UNREAD_BODY_GRACE_MS = 5000;

/**
 * The worker's end of bulk sync (`/v1/sandboxes/{id}/sync`, `/v1/volumes/{id}/sync`): a tar
 * stream into or out of a tree (sandboxes/tree-sync.ts), on a private socket of the worker that
 * only its front door reaches, after the front door's auth and ownership checks. The bytes go
 * straight between the client's connection and the sandbox's agent, a chunk at a time.
 */
export function createSyncServer(targets: SyncTargets): Server {
  return createServer((request, response) => {
    serve(request, response, targets).catch((error: unknown) => sendError(response, asContractError(error)));
  });
}

async function serve(request: IncomingMessage, response: ServerResponse, targets: SyncTargets): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://sync');
  const route = ROUTE.exec(url.pathname);
  if (!route) return sendError(response, contractError('validation.invalid_request', `no route ${url.pathname}`));
  const [, kind, id] = route as unknown as [string, 'sandboxes' | 'volumes', string];
  const options = syncOptions(url, kind, targets.maxFileBytes);
  const direction = request.method === 'GET' ? 'out' : 'in';
  const run = (agent: SandboxAgentPort) => (direction === 'in' ? syncInto(agent, request, response, options) : syncOutOf(agent, response, options, url));
  return kind === 'volumes' ? targets.withVolume(id, run) : targets.withSandbox(id, run);
}

async function syncInto(agent: SandboxAgentPort, request: IncomingMessage, response: ServerResponse, options: SyncOptions): Promise<void> {
  const encoding = request.headers['content-encoding'];
  const gzipped = encoding === 'gzip' || (request.headers['content-type'] ?? '').startsWith('application/gzip');
  if (encoding !== undefined && encoding !== 'gzip' && encoding !== 'identity') {
    return sendError(response, contractError('validation.invalid_request', `a sync takes a tar stream, plain or gzip; not ${encoding}`));
  }
  const source: Readable = gzipped ? request.pipe(createGunzip()) : request;
  const report = await syncIn(agent, source, options).catch((error: NodeJS.ErrnoException) => {
    // zlib's own failures (Z_DATA_ERROR, Z_BUF_ERROR...) are the body's.
    if (gzipped && error.code?.startsWith('Z_')) throw invalid(`the body is not whole gzip data: ${error.message}`);
    throw error;
  });
  if (!request.readableEnded) {
    // What a budget left unsent is read and dropped for a while, so the client hears the answer
    // before its next write finds the connection closed; then it is closed.
    if (gzipped) request.unpipe();
    // The judge's iterator stopped reading but still listens: its listener would hold the stream paused.
    request.removeAllListeners('readable');
    request.resume();
    // The socket as it is now (none where the client has gone already): the request lets go of it once answered.
    const socket = request.socket as Socket | null;
    const drop = setTimeout(() => socket?.destroy(), UNREAD_BODY_GRACE_MS).unref();
    request.once('end', () => clearTimeout(drop));
  }
  sendJson(response, 200, report);
}

async function syncOutOf(agent: SandboxAgentPort, response: ServerResponse, options: SyncOptions, url: URL): Promise<void> {
  const gzip = url.searchParams.get('compress') === 'gzip';
  // The first bytes wait for tar to start: a directory that is not there is a 404, not a 200 cut short.
  const stat = await agent.request({ op: 'stat', path: options.path, user: options.user }).catch(() => null);
  if (stat?.entry.type !== 'directory') return sendError(response, contractError('validation.invalid_request', `${options.path} is not a directory of the sandbox`));
  response.writeHead(200, { 'content-type': gzip ? 'application/gzip' : 'application/x-tar', trailer: SYNC_REPORT_TRAILER });
  const body = new PassThrough();
  const last = gzip ? body.pipe(createGzip()) : body;
  last.pipe(response, { end: false });
  const receiverGone = new AbortController();
  response.once('close', () => {
    if (!response.writableFinished) receiverGone.abort();
  });
  const flushed = new Promise<void>((resolve) => {
    last.once('end', resolve);
    receiverGone.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  let outcome;
  try {
    outcome = await syncOut(agent, body, options, receiverGone.signal);
  } catch {
    // Gone, or failed midway: the answer has begun, so it is cut (its report never comes).
    response.destroy();
    return;
  }
  // The deadline came inside an entry: cut too, so the receiver keeps nothing of that entry.
  if (outcome.cut) return void response.destroy();
  await flushed;
  if (receiverGone.signal.aborted) return;
  response.addTrailers({ [SYNC_REPORT_TRAILER]: JSON.stringify(outcome.report) });
  response.end();
}

/** The query's sync, its numbers checked (contract/tree-sync.ts SyncQuery, as a URL carries it). */
function syncOptions(url: URL, kind: 'sandboxes' | 'volumes', maxFileBytes: number): SyncOptions {
  const { searchParams: query } = url;
  const path = query.get('path');
  if (!path) throw invalid('the path query parameter is required');
  const number = (name: string): number | undefined => {
    const text = query.get(name);
    if (text === null) return undefined;
    const value = Number(text);
    if (!Number.isFinite(value) || value < 0) throw invalid(`${name} is a number from 0`);
    return value;
  };
  const limits = { max_bytes: number('max_bytes'), max_files: number('max_files'), timeout: number('timeout') };
  if (limits.timeout !== undefined && (limits.timeout === 0 || limits.timeout > MAX_SYNC_TIMEOUT_SECONDS))
    throw invalid(`timeout is more than 0 and at most ${MAX_SYNC_TIMEOUT_SECONDS} seconds`);
  return syncOptionsOf({ path, include: query.getAll('include'), exclude: query.getAll('exclude'), ...limits }, kind === 'volumes' ? 'volume' : 'sandbox', maxFileBytes);
}

function invalid(message: string): CodedError {
  return new CodedError(contractError('validation.invalid_request', message));
}

function asContractError(error: unknown): ContractError {
  if (error instanceof CodedError) return error.error;
  // What the sandbox said of the request's path (not there, not a directory, not its user's to write).
  if (error instanceof AgentOperationError && error.code !== 'failed') return contractError('validation.invalid_request', error.message);
  return contractError('internal.error', error instanceof Error ? error.message : String(error));
}

function sendError(response: ServerResponse, error: ContractError): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  sendJson(response, ERROR_CODES[error.code].http, { error });
}
