import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { forward, forwardUpgrade } from '../util/http-forward.js';
import { connect, createServer as createNetServer, type Socket } from 'node:net';
import { listenPrivateSocket } from '../isolation/host/private-socket.js';
import type { Duplex } from 'node:stream';
import { jsonAnswer, sendJson } from '../util/http-messages.js';
import { FORWARDED_HEADER } from '../contract/forwarded.js';
import { isForwarded } from './forwarded.js';
import type { FastifyInstance } from 'fastify';
import { countSandboxRequest } from '../util/metrics.js';
import { contractError } from '../contract/errors.js';
import { isVolumeContentUrl } from '../envd/volume-content.js';
import { badTarget, isSignedFilesUrl, SANDBOX_ID, sandboxOfHost, sandboxTarget, type SandboxAddress } from '../envd/sandbox-address.js';
import type { SandboxHost, SandboxPlace } from '../sandboxes/sandbox-host.js';

/** A route of one sandbox (E2B's `/sandboxes/{id}...`, `/v2/sandboxes/{id}/connect`, ours `/v1/sandboxes/{id}...`): its id. */
const SANDBOX_ROUTE = /^\/(?:v1\/|v2\/)?sandboxes\/([0-9a-z]{24})(?:[/?]|$)/;

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
    if (!target && !isSignedFilesUrl(request.url ?? '/') && !isVolumeContentUrl(request.url ?? '/')) return false;
    const started = performance.now();
    response.once('finish', () => countSandboxRequest(request.method ?? 'GET', response.statusCode, (performance.now() - started) / 1000));
    const answered = target ? toSandbox(sandboxes, target, request, response) : forwardToSandboxHost(sandboxes, request, response);
    answered.catch((error: Error) => {
      if (!response.headersSent) sendJson(response, 503, { message: `the sandbox's place could not be looked up: ${error.message}`, code: 503 });
      else response.destroy();
    });
    return true;
  };
}

/** Connections the worker sent back (takeBack): never handed over again. */
const takenBack = new WeakSet<Socket>();

/**
 * Takes back from the process that serves the sandboxes' traffic the requests on connections
 * handed over to it that are not for a sandbox it holds (envd/client-connections.ts): its
 * connections to a private unix socket are served by this HTTP server as any client's, and never
 * handed over again (a paused sandbox's request would go round for ever). Closed with the app.
 */
export async function takeBack(app: FastifyInstance, sandboxes: SandboxHost): Promise<void> {
  if (!sandboxes.takeBackAt) return;
  const open = new Set<Socket>();
  const door = createNetServer((socket) => {
    takenBack.add(socket);
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    app.server.emit('connection', socket);
  });
  const listening = await listenPrivateSocket(door, 'door');
  sandboxes.takeBackAt(listening.socketPath);
  app.addHook('onClose', async () => {
    for (const socket of open) socket.destroy();
    await listening.close();
  });
}

/**
 * A connection whose first request names a sandbox's port by its host name (`{port}-{id}.{domain}`,
 * no `E2b-Sandbox-Id`, which SDKs send on connections they share with the service's own routes)
 * goes to the process that serves the sandbox's traffic (SandboxHost.takeConnection), whole: its
 * requests and answers no longer pass through this process (envd/client-connections.ts). Not
 * one for a sandbox another front door holds, nor one that names none validly: those are
 * answered here as any request.
 */
export async function handOffSandboxConnection(sandboxes: SandboxHost, socket: Socket, read: Buffer, headers: IncomingHttpHeaders): Promise<boolean> {
  if (!sandboxes.takeConnection || takenBack.has(socket) || headers['e2b-sandbox-id'] !== undefined) return false;
  const target = sandboxOfHost(headers.host);
  if (target === null || badTarget(target) !== null) return false;
  if (!isForwarded({ headers }) && !('here' in (await sandboxes.placeOf(target.sandboxId)))) return false;
  return !socket.destroyed && sandboxes.takeConnection(socket, read);
}

async function toSandbox(sandboxes: SandboxHost, target: SandboxAddress, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const bad = badTarget(target);
  if (bad !== null) return sendJson(response, 400, { sandboxId: target.sandboxId, message: bad, code: 400 });
  if (await forwardedToOwner(sandboxes, target.sandboxId, request, response)) return;
  const socketPath = sandboxes.envdSocket();
  if (socketPath === null) return sendJson(response, 503, { sandboxId: target.sandboxId, message: 'the sandbox host is starting', code: 503 });
  forward(request, response, { socketPath }, { ...request.headers, 'e2b-sandbox-id': target.sandboxId, 'e2b-sandbox-port': String(target.port) }, hostUnanswered);
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
  const headers = { ...request.headers, 'e2b-sandbox-id': target.sandboxId, 'e2b-sandbox-port': String(target.port), ...(owner && { [FORWARDED_HEADER]: '1' }) };
  forwardUpgrade(request, headers, head, socket, upstream);
}

/**
 * Whether a request is a sandbox's traffic, passed on whole to its envd or its ports (a sandbox's
 * `E2b-Sandbox-Id` or `{port}-{id}.{domain}`, or a signed /files URL), not a request to this
 * service's own routes.
 */
export function isSandboxTraffic(request: IncomingMessage): boolean {
  return sandboxTarget(request.headers) !== null || isSignedFilesUrl(request.url ?? '/') || isVolumeContentUrl(request.url ?? '/');
}

/** What a client is told when the sandboxes' host (the worker process) did not answer. */
function hostUnanswered(response: ServerResponse, said: string): void {
  sendJson(response, 502, { message: `the sandbox's host did not answer: ${said}`, code: 502 });
}

/**
 * What names no sandbox but is served with their traffic: a signed /files URL (this worker's
 * envd finds the sandbox whose access token signed it), and E2B's volume content API (a volume's
 * token is its auth). In the distributed mode, only this front door's sandboxes and volumes.
 */
async function forwardToSandboxHost(sandboxes: SandboxHost, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const socketPath = sandboxes.envdSocket();
  if (socketPath === null) return sendJson(response, 503, { message: 'the sandbox host is starting', code: 503 });
  const { 'e2b-sandbox-id': _named, 'e2b-sandbox-port': _port, ...headers } = request.headers;
  forward(request, response, { socketPath }, headers, hostUnanswered);
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
