import type { FastifyInstance } from 'fastify';

/**
 * An answer given before the request's body has all arrived (401 from the headers, 415, 413
 * from Content-Length, an unknown route) closes the connection. Kept alive, Node would read
 * the rest of the body to reach the next request: a caller without the token could make the
 * service read a 1 GiB body it had already refused.
 */
export function closeOnUnreadBody(app: FastifyInstance): void {
  app.addHook('onSend', async (request, reply) => {
    if (!request.raw.complete) reply.header('connection', 'close');
  });
}
