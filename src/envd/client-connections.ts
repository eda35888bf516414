import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { clientServer, type ClientBounds } from '../util/client-server.js';
import { limitConnections } from '../util/connection-limits.js';
import { jsonAnswer, sendJson } from '../util/http-messages.js';
import { countSandboxRequest } from '../util/metrics.js';
import type { EnvdServer } from './envd-server.js';
import { forward, forwardUpgrade } from '../util/http-forward.js';
import { badTarget, sandboxOfHost } from './sandbox-address.js';

/** Said of a request for the front door before it said where it takes requests back (never, once the service has started). */
const NOT_YET = 'the front door cannot take this request back yet: send it on a connection of its own';

/**
 * Clients' connections the front door handed over (http/connection-handoff.ts): each came for a
 * sandbox's port by its host name, and is served here from then on, without the hop through the
 * front door, as the front door would serve it: Node's strict parser, the clients' deadlines and
 * count per address (the front door's count let it go with the connection). A request on it for
 * a sandbox here by its host name is envd's, as at the front door; any other (a client may send
 * requests for several hosts on one connection: the service's own routes, another sandbox's)
 * goes back to the front door (returnTo), through its private socket, which answers it as its own.
 */
export function clientConnections(
  envd: EnvdServer,
  holds: (sandboxId: string) => boolean,
  bounds: ClientBounds,
): { take(socket: Socket, head: Buffer): void; returnTo(socketPath: string): void; close(): Promise<void> } {
  let frontDoor: string | null = null;
  /**
   * Whether a request is for a sandbox this process holds, by its host name (then named to envd
   * as the front door names it, by headers). Anything else is the front door's to answer: a
   * sandbox named by E2B's headers or a signed URL, one held elsewhere (the distributed mode) or
   * paused, a name that names none, the service's own routes.
   */
  const held = (request: IncomingMessage): boolean => {
    const target = request.headers['e2b-sandbox-id'] === undefined ? sandboxOfHost(request.headers.host) : null;
    if (target === null || badTarget(target) !== null || !holds(target.sandboxId)) return false;
    request.headers['e2b-sandbox-id'] = target.sandboxId;
    request.headers['e2b-sandbox-port'] = String(target.port);
    return true;
  };
  const backToFrontDoor = (request: IncomingMessage, response: ServerResponse): void => {
    if (frontDoor === null) return sendJson(response, 421, { message: NOT_YET, code: 421 });
    forward(request, response, { socketPath: frontDoor }, request.headers, (answer, said) =>
      sendJson(answer, 502, { message: `the front door did not answer: ${said}`, code: 502 }),
    );
  };
  const server = clientServer(bounds, (request: IncomingMessage, response: ServerResponse) => {
    if (!held(request)) return backToFrontDoor(request, response);
    const started = performance.now();
    response.once('finish', () => {
      countSandboxRequest(request.method ?? 'GET', response.statusCode, (performance.now() - started) / 1000);
      // Answered before its body was all sent (a refusal): closed after the answer rather than the rest read, as at the front door.
      if (!request.complete) request.socket.end();
    });
    envd.answer(request, response);
  });
  server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => undefined);
    if (held(request)) return envd.upgrade(request, socket, head);
    if (frontDoor === null) return void socket.end(jsonAnswer(421, { message: NOT_YET, code: 421 }));
    forwardUpgrade(request, request.headers, head, socket, connect({ path: frontDoor }));
  });
  limitConnections(server, { total: bounds.maxConnections, perAddress: bounds.maxConnectionsPerAddress }, () => undefined);
  let closed: Promise<void> | undefined;
  return {
    take(socket, head) {
      // The bytes the front door read come first, then the rest as the client sends it.
      socket.unshift(head);
      server.emit('connection', socket);
      socket.resume();
    },
    returnTo(socketPath) {
      frontDoor = socketPath;
    },
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      })),
  };
}
