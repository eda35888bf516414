import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { answerClientError } from './client-errors.js';

/**
 * A client has `requestTimeoutMs` from its request's headers to the end of its body; past it the
 * request is answered 408 `request.timeout` (unless an answer began) and its connection closed,
 * as Node's own request deadline answers. Node's applies to every request alike, so it is off
 * (requestTimeout 0) and this one is kept instead, for all but `exempt`: traffic for a sandbox
 * (its envd, its ports), whose uploads and streams last as long as their client and the sandbox
 * keep them (an upload to a server in the sandbox may take minutes), bounded by the sandbox's
 * life and its connection limits rather than by this service's deadline for its own routes.
 */
export function enforceRequestDeadline(server: Server, requestTimeoutMs: number, exempt: (request: IncomingMessage) => boolean): void {
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    if (request.complete || exempt(request)) return;
    const timer = setTimeout(() => {
      if (request.complete) return;
      // An answer begun (a route that refused the body early) is cut rather than followed by another.
      if (response.headersSent) request.socket.destroy();
      else answerClientError(Object.assign(new Error('request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), request.socket);
    }, requestTimeoutMs);
    const clear = () => clearTimeout(timer);
    request.once('end', clear);
    request.once('close', clear);
  });
}
