import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import { answerClientError } from './client-errors.js';

/**
 * Node looks for connections past their header deadline only every connectionsCheckingInterval,
 * so a connection that sends nothing could outlive the deadline by that interval. A connection's
 * first request must have its headers in by the deadline itself: else it is answered 408
 * `request.timeout` and closed, as Node's own check answers. (Later requests on a kept-alive
 * connection are bounded by the keep-alive deadline, then Node's check.)
 */
export function enforceFirstHeaderDeadline(server: Server, headersTimeoutMs: number): void {
  const pending = new WeakMap<Socket, NodeJS.Timeout>();
  server.on('connection', (socket: Socket) => {
    if (socket.destroyed) return;
    const timer = setTimeout(() => answerClientError(Object.assign(new Error('headers timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), socket), headersTimeoutMs);
    pending.set(socket, timer);
    socket.once('close', () => clearTimeout(timer));
  });
  server.on('request', (request: IncomingMessage) => clearTimeout(pending.get(request.socket)));
}
