import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { pipeline } from 'node:stream';
import { PortTunnel } from '../sandboxes/port-tunnel.js';
import { PortClosedError } from '../isolation/types.js';
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
 * A connection to the port on the sandbox's loopback: the host's own where the sandbox lets the
 * host into its network (a relay, no protocol of ours on the way), else one its agent makes
 * (sandboxes/port-tunnel.ts). Rejects with PortClosedError when nothing listens there.
 */
async function openPort(target: EnvdTarget, port: number, windowBytes: number): Promise<Duplex> {
  const own = target.connectPort?.(port);
  if (own) return own;
  const tunnel = new PortTunnel(target.agent, port, windowBytes);
  try {
    await tunnel.open();
  } catch (error) {
    tunnel.destroy();
    throw error;
  }
  return tunnel;
}

/** What the client is told when the port could not be reached. */
function unreached(sandboxId: string, port: number, error: Error): object {
  if (error instanceof PortClosedError) return closedPort(sandboxId, port);
  return { sandboxId, message: `port ${port} of the sandbox did not answer: ${error.message}`, port, code: 502 };
}

/**
 * A request to a port of the sandbox (not envd's, not the code interpreter's): passed on to the
 * server listening there through a connection of its own (openPort), one a request; its answer
 * back as it comes, streams included.
 */
export async function servePort(request: IncomingMessage, response: ServerResponse, sandboxId: string, target: EnvdTarget, port: number, windowBytes: number): Promise<void> {
  let connection: Duplex;
  try {
    connection = await openPort(target, port, windowBytes);
  } catch (error) {
    return sendJson(response, 502, unreached(sandboxId, port, error as Error));
  }
  // What fails it while the request uses it is the request's error (below); after, nothing is owed.
  connection.on('error', () => undefined);
  if (response.destroyed) return void connection.destroy();
  // One connection a request: the server in the sandbox closes it once it answered, which ends it.
  const headers = { ...passedOn(request.headers, target, port), connection: 'close' };
  const upstream = httpRequest({ createConnection: () => connection as never, method: request.method, path: request.url, headers }, (answer) => {
    response.writeHead(answer.statusCode ?? 502, answer.headers);
    pipeline(answer, response, () => undefined);
  });
  upstream.on('error', (error) => {
    if (response.headersSent) response.destroy();
    else sendJson(response, 502, unreached(sandboxId, port, error));
  });
  response.on('close', () => {
    upstream.destroy();
    connection.destroy();
  });
  request.pipe(upstream);
}

/**
 * An upgrade (a WebSocket) to a port of the sandbox: the request passed on, then both ways byte
 * for byte through one connection, as long as either side keeps it.
 */
export async function upgradePort(request: IncomingMessage, socket: Duplex, head: Buffer, sandboxId: string, target: EnvdTarget, port: number, windowBytes: number): Promise<void> {
  // What the client sends meanwhile waits for the connection.
  socket.pause();
  let connection: Duplex;
  try {
    connection = await openPort(target, port, windowBytes);
  } catch (error) {
    return void socket.end(jsonAnswer(502, unreached(sandboxId, port, error as Error)));
  }
  connection.on('error', () => socket.destroy());
  socket.on('error', () => connection.destroy());
  socket.on('close', () => connection.destroy());
  if (socket.destroyed) return void connection.destroy();
  connection.write(requestHead(request, passedOn(request.headers, target, port)));
  if (head.length > 0) connection.write(head);
  socket.pipe(connection).pipe(socket);
}
