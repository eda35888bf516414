import { Agent, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import type { Duplex } from 'node:stream';
import { jsonAnswer, requestHead, sendJson } from '../util/http-messages.js';
import { pipeline } from 'node:stream';
import { FORWARDED_HEADER } from '../contract/forwarded.js';
import { isForwarded } from './forwarded.js';
import type { FastifyInstance } from 'fastify';
import { httpDuration, httpRequests } from '../util/metrics.js';
import { contractError } from '../contract/errors.js';
import { SANDBOX_ID_PATTERN } from '../contract/sandbox.js';
import { ENVD_PORT } from '../contract/e2b.js';
import type { SandboxHost, SandboxPlace } from '../sandboxes/sandbox-host.js';

/** `{port}-{sandboxId}.{domain}`, how E2B names a sandbox's port when a wildcard DNS name points here. */
const SANDBOX_HOST = /^(\d{1,5})-([0-9a-z]{8,64})\./;

/** The sandbox and port a request is for, or null when it is for this service itself. */
export function sandboxTarget(headers: IncomingHttpHeaders): { sandboxId: string; port: number } | null {
  const id = headers['e2b-sandbox-id'];
  if (typeof id === 'string' && id !== '') {
    const port = Number(headers['e2b-sandbox-port'] ?? ENVD_PORT);
    return { sandboxId: id, port: Number.isInteger(port) ? port : -1 };
  }
  const byName = SANDBOX_HOST.exec(headers.host ?? '');
  return byName ? { sandboxId: byName[2]!, port: Number(byName[1]) } : null;
}

/** The `route` of a sandbox's traffic in the service's HTTP metrics. */
const SANDBOX_ROUTE_LABEL = '(sandbox)';

/** The shape of a sandbox id (ours are 24 of [0-9a-z]); anything else is no sandbox, found without asking the database. */
const SANDBOX_ID = new RegExp(SANDBOX_ID_PATTERN);

/** A route of one sandbox (E2B's `/sandboxes/{id}...`, `/v2/sandboxes/{id}/connect`, ours `/v1/sandboxes/{id}...`): its id. */
const SANDBOX_ROUTE = /^\/(?:v1\/|v2\/)?sandboxes\/([0-9a-z]{24})(?:[/?]|$)/;

/** Why a request's sandbox and port cannot name one (a 400), or null. */
function badTarget(target: { sandboxId: string; port: number }): string | null {
  if (!Number.isInteger(target.port) || target.port < 1 || target.port > 65535) return 'a sandbox port is an integer from 1 to 65535';
  return SANDBOX_ID.test(target.sandboxId) ? null : 'no sandbox has such an id';
}

/**
 * Traffic for a sandbox, as E2B's SDK sends it to `E2B_SANDBOX_URL` (its `E2b-Sandbox-Id` and
 * `E2b-Sandbox-Port` headers) or to a `{port}-{id}.{domain}` host name, goes to the worker
 * process byte for byte, streams and WebSocket upgrades included, before anything of this service
 * sees it: to the sandbox's envd (port 49983), its code interpreter (49999), or any other port of
 * the sandbox through a connection its agent makes (envd-server.ts, sandboxes/port-tunnel.ts). Each does its
 * own auth (the sandbox's access token, its traffic token), so the service token is not asked
 * for, as E2B's sandbox URLs do not carry the API key. In the distributed mode a request for a
 * sandbox another front door holds (envd's, or a route of that sandbox) goes to that front door
 * whole, which answers it as its own, auth included.
 */
export function installEnvdProxy(app: FastifyInstance, sandboxes: SandboxHost, take = takeSandboxTraffic(sandboxes)): void {
  // The server takes a sandbox's traffic before Fastify (takeSandboxTraffic); a request made
  // into Fastify without the server (inject) is taken by its first hook alike.
  app.addHook('onRequest', async (request, reply) => {
    if (take(request.raw, reply.raw)) reply.hijack();
  });
  app.server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => void upgradeToSandbox(sandboxes, request, socket, head));
}

/**
 * The HTTP server's first look at each request: a sandbox's traffic (installEnvdProxy) is taken
 * here, before Fastify, whose routing, hooks and per-request log line are for the service's own
 * routes (a third of a millisecond of the front door's CPU a request, measured); its own metrics
 * count it (`route="(sandbox)"`). Anything else is left to Fastify (false).
 */
export function takeSandboxTraffic(sandboxes: SandboxHost): (request: IncomingMessage, response: ServerResponse) => boolean {
  return (request, response) => {
    const target = sandboxTarget(request.headers);
    if (!target && !isSignedFilesUrl(request.url ?? '/')) return false;
    const started = performance.now();
    response.once('finish', () => countSandboxRequest(request.method ?? 'GET', response.statusCode, (performance.now() - started) / 1000));
    const answered = target ? toSandbox(sandboxes, target, request, response) : forwardSignedFiles(sandboxes, request, response);
    answered.catch((error: Error) => {
      if (!response.headersSent) sendJson(response, 503, { message: `the sandbox's place could not be looked up: ${error.message}`, code: 503 });
      else response.destroy();
    });
    return true;
  };
}

/** A sandbox's request in the service's HTTP metrics, as countRequests counts its own routes'. */
function countSandboxRequest(method: string, status: number, seconds: number): void {
  httpRequests.inc({ method, route: SANDBOX_ROUTE_LABEL, status: String(status) });
  httpDuration.observe({ method, route: SANDBOX_ROUTE_LABEL }, seconds);
}

async function toSandbox(sandboxes: SandboxHost, target: { sandboxId: string; port: number }, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const bad = badTarget(target);
  if (bad !== null) return sendJson(response, 400, { sandboxId: target.sandboxId, message: bad, code: 400 });
  if (await forwardedToOwner(sandboxes, target.sandboxId, request, response)) return;
  const socketPath = sandboxes.envdSocket();
  if (socketPath === null) return sendJson(response, 503, { sandboxId: target.sandboxId, message: 'the sandbox host is starting', code: 503 });
  forward(request, response, { socketPath }, { ...request.headers, 'e2b-sandbox-id': target.sandboxId, 'e2b-sandbox-port': String(target.port) });
}

/**
 * A WebSocket (or any) upgrade for a sandbox's port: the request as it came, then both ways byte
 * for byte, to the worker (or the front door that holds the sandbox), which answers it. One not
 * for a sandbox is refused: this service upgrades nothing of its own.
 */
async function upgradeToSandbox(sandboxes: SandboxHost, request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
  socket.on('error', () => undefined);
  const target = sandboxTarget(request.headers);
  const refuse = (status: number, message: string) => {
    socket.end(jsonAnswer(status, { message, code: status }));
  };
  if (!target) return refuse(404, 'nothing here upgrades');
  const bad = badTarget(target);
  if (bad !== null) return refuse(400, bad);
  const place: SandboxPlace | null = isForwarded(request) ? null : await sandboxes.placeOf(target.sandboxId).catch(() => null);
  const owner = place && 'address' in place ? new URL(place.address) : null;
  const socketPath = sandboxes.envdSocket();
  if (owner === null && socketPath === null) return refuse(503, 'the sandbox host is starting');
  const upstream = owner ? connect({ host: owner.hostname, port: Number(owner.port) }) : connect({ path: socketPath! });
  upstream.on('error', () => socket.destroy());
  socket.on('close', () => upstream.destroy());
  const headers = { ...request.headers, 'e2b-sandbox-id': target.sandboxId, 'e2b-sandbox-port': String(target.port), ...(owner && { [FORWARDED_HEADER]: '1' }) };
  upstream.write(requestHead(request, headers));
  upstream.write(head);
  socket.pipe(upstream).pipe(socket);
}

/**
 * Whether a request is a sandbox's traffic, passed on whole to its envd or its ports (a sandbox's
 * `E2b-Sandbox-Id` or `{port}-{id}.{domain}`, or a signed /files URL), not a request to this
 * service's own routes.
 */
export function isSandboxTraffic(request: IncomingMessage): boolean {
  return sandboxTarget(request.headers) !== null || isSignedFilesUrl(request.url ?? '/');
}

/** `/files?...signature=...`: a signed download or upload URL (E2B's `downloadUrl` / `uploadUrl`) made against this service's URL. */
function isSignedFilesUrl(url: string): boolean {
  const parsed = new URL(url, 'http://front-door');
  return parsed.pathname === '/files' && parsed.searchParams.has('signature');
}

/**
 * A signed /files URL names no sandbox: this worker's envd finds the sandbox whose access token
 * signed it. (In the distributed mode only this front door's sandboxes are looked in.)
 */
async function forwardSignedFiles(sandboxes: SandboxHost, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const socketPath = sandboxes.envdSocket();
  if (socketPath === null) return sendJson(response, 503, { message: 'the sandbox host is starting', code: 503 });
  const { 'e2b-sandbox-id': _named, 'e2b-sandbox-port': _port, ...headers } = request.headers;
  forward(request, response, { socketPath }, headers);
}

/**
 * In the distributed mode, a route of a sandbox another front door holds (ours or E2B's control
 * plane) goes there whole. Installed after auth: a caller without the token is refused here,
 * before the database is asked where the sandbox lives.
 */
export function installSandboxForwarding(app: FastifyInstance, sandboxes: SandboxHost): void {
  app.addHook('onRequest', async (request, reply) => {
    const id = SANDBOX_ROUTE.exec(request.url)?.[1];
    if (id !== undefined && (await forwardedToOwner(sandboxes, id, request.raw, reply.raw))) reply.hijack();
  });
}

/** Sends the request to the front door that holds the sandbox, if that is another; true when it did. */
async function forwardedToOwner(sandboxes: SandboxHost, id: string, request: IncomingMessage, response: ServerResponse): Promise<boolean> {
  if (isForwarded(request) || !SANDBOX_ID.test(id)) return false;
  const place = await sandboxes.placeOf(id);
  if (!('address' in place)) return false;
  const { hostname, port } = new URL(place.address);
  const headers = { ...request.headers, [FORWARDED_HEADER]: '1' };
  const url = request.url ?? '/';
  forward(request, response, { host: hostname, port: Number(port) }, headers, (answer, said) => lostAt(answer, url, id, `${place.address} ${said}`));
  return true;
}

/**
 * The front door that held the sandbox does not answer: it took the sandbox with it. Said in the
 * dialect of the route asked: ours is 410 sandbox.lost; E2B's control plane says not found, as it
 * does of a sandbox that is gone; envd's traffic gets 502, which the SDK reads as a sandbox gone.
 */
function lostAt(response: ServerResponse, url: string, id: string, said: string): void {
  const message = `the front door that held sandbox ${id} does not answer (${said}); create another sandbox`;
  if (url.startsWith('/v1/')) sendJson(response, 410, { error: contractError('sandbox.lost', message) });
  else if (SANDBOX_ROUTE.test(url)) sendJson(response, 404, { code: 404, message });
  else sendJson(response, 502, { sandboxId: id, message, code: 502 });
}

/**
 * The hop to this worker's envd (or another front door) keeps its connections between requests:
 * a request costs no connect and no accept there. An idle one is closed here after HOP_IDLE_MS,
 * before the other side would close it (envd's keep-alive deadline is longer, envd-server.ts; a
 * front door's is the clients' one, whose `Keep-Alive` hint the agent takes when shorter), so none
 * is reused as it closes.
 */
const HOP_IDLE_MS = 4000;
const hop = new Agent({ keepAlive: true, timeout: HOP_IDLE_MS });

/** Headers of the framing of a request, never dropped: its body is read and sent by them. */
const FRAMING = new Set(['content-length', 'transfer-encoding', 'host']);

/**
 * The request's headers less those of the client's connection alone (RFC 9110 7.6.1: Connection,
 * what it names, and the other hop-by-hop ones): a `Connection: close` passed on would close the
 * kept connection of the hop after each request.
 */
function endToEnd(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const named = String(headers.connection ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '' && !FRAMING.has(name));
  const kept = { ...headers };
  for (const name of ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', ...named]) delete kept[name];
  return kept;
}

/** The request as it came, to a unix socket (this worker's envd) or another front door; its answer back as it comes. */
function forward(
  incoming: IncomingMessage,
  outgoing: ServerResponse,
  to: { socketPath: string } | { host: string; port: number },
  headers: IncomingHttpHeaders,
  unanswered: (response: ServerResponse, said: string) => void = (response, said) => sendJson(response, 502, { message: `the sandbox's host did not answer: ${said}`, code: 502 }),
): void {
  const upstream = httpRequest({ ...to, agent: hop, method: incoming.method, path: incoming.url, headers: endToEnd(headers) }, (answer) => {
    // Answered before its body was all sent (a refusal, a sandbox that is gone): the connection
    // closes after the answer, rather than reading the rest of a body nobody wants, which no
    // deadline bounds for a sandbox's traffic (request-deadline.ts).
    // Its connection's headers are the hop's (kept alive, for longer than the client's is), not the client's.
    const headers = endToEnd(answer.headers);
    outgoing.writeHead(answer.statusCode ?? 502, incoming.complete ? headers : { ...headers, connection: 'close' });
    // An answer cut off (its host died mid-stream: the worker, the other front door) closes the
    // client's connection, rather than leaving a stream open that nothing will ever end.
    pipeline(answer, outgoing, () => undefined);
  });
  upstream.on('error', (error) => {
    if (!outgoing.headersSent) unanswered(outgoing, error.message);
    else outgoing.destroy();
  });
  // The client went away: so does the forwarded request (envd keeps a command running without its client).
  outgoing.on('close', () => upstream.destroy());
  incoming.pipe(upstream);
}
