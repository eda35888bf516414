import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { pipeline } from 'node:stream';
import { PortClosedError, PortTunnel } from '../sandboxes/port-tunnel.js';
import type { EnvdTarget } from './target.js';
import { FORWARDED_HEADER } from '../contract/forwarded.js';
import { jsonAnswer, requestHead, sendJson } from '../util/http-messages.js';

/** What a request to a sandbox's port carries for this service alone: not passed on to the sandbox's server. */
const OURS = ['e2b-sandbox-id', 'e2b-sandbox-port', 'e2b-traffic-access-token', FORWARDED_HEADER];

/** The headers the sandbox's server gets: the client's, less ours, its Host masked where the sandbox asks (E2B's maskRequestHost). */
function passedOn(headers: IncomingHttpHeaders, target: EnvdTarget, port: number): IncomingHttpHeaders {
  const kept: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (!OURS.includes(name)) kept[name] = value;
  if (target.maskRequestHost !== null) kept.host = target.maskRequestHost.replaceAll('${PORT}', String(port));
  return kept;
}

/** E2B's proxy's answer for a port of a running sandbox that nobody listens on. */
function closedPort(sandboxId: string, port: number): object {
  return { sandboxId, message: 'The sandbox is running but port is not open', port, code: 502 };
}

/**
 * A request to a port of the sandbox (not envd's, not the code interpreter's): passed on to the
 * server listening there, through a connection the sandbox's agent makes (sandboxes/port-tunnel.ts),
 * one a request; its answer back as it comes, streams included.
 */
export function servePort(request: IncomingMessage, response: ServerResponse, sandboxId: string, target: EnvdTarget, port: number, windowBytes: number): void {
  const tunnel = new PortTunnel(target.agent, port, windowBytes);
  // What fails it while the request uses it is the request's error (below); after, nothing is owed.
  tunnel.on('error', () => undefined);
  // One connection a request: the server in the sandbox closes it once it answered, which ends it.
  const headers = { ...passedOn(request.headers, target, port), connection: 'close' };
  const upstream = httpRequest({ createConnection: () => tunnel as never, method: request.method, path: request.url, headers }, (answer) => {
    response.writeHead(answer.statusCode ?? 502, answer.headers);
    pipeline(answer, response, () => undefined);
  });
  upstream.on('error', (error) => {
    if (response.headersSent) response.destroy();
    else if (error instanceof PortClosedError) sendJson(response, 502, closedPort(sandboxId, port));
    else sendJson(response, 502, { sandboxId, message: `port ${port} of the sandbox did not answer: ${error.message}`, port, code: 502 });
  });
  response.on('close', () => {
    upstream.destroy();
    tunnel.destroy();
  });
  request.pipe(upstream);
  tunnel.open().catch((error: Error) => tunnel.destroy(error));
}

/**
 * An upgrade (a WebSocket) to a port of the sandbox: the request passed on, then both ways byte
 * for byte through one connection, as long as either side keeps it.
 */
export function upgradePort(request: IncomingMessage, socket: Duplex, head: Buffer, sandboxId: string, target: EnvdTarget, port: number, windowBytes: number): void {
  const tunnel = new PortTunnel(target.agent, port, windowBytes);
  let answered = false;
  tunnel.once('data', () => (answered = true));
  tunnel.on('error', (error) => {
    if (!answered && error instanceof PortClosedError) {
      socket.end(jsonAnswer(502, closedPort(sandboxId, port)));
    } else socket.destroy();
  });
  socket.on('error', () => tunnel.destroy());
  socket.on('close', () => tunnel.destroy());
  tunnel.write(requestHead(request, passedOn(request.headers, target, port)));
  if (head.length > 0) tunnel.write(head);
  socket.pipe(tunnel).pipe(socket);
  tunnel.open().catch((error: Error) => tunnel.destroy(error));
}
