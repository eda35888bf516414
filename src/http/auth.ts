import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { contractError } from '../contract/errors.js';
import { sendError } from './errors.js';

const OPEN_ROUTES = new Set(['/health']);

/** With a token, every route but /health needs `Authorization: Bearer <token>`, compared in constant time. */
export function installBearerAuth(app: FastifyInstance, token: string): void {
  const expected = digest(token);
  app.addHook('onRequest', async (request, reply) => {
    if (OPEN_ROUTES.has(request.routeOptions.url ?? '')) return;
    const header = request.headers.authorization ?? '';
    const given = header.startsWith('Bearer ') ? header.slice('Bearer '.length) : '';
    // Equal-length digests: timingSafeEqual needs them, and the token length leaks nothing.
    if (!timingSafeEqual(digest(given), expected)) {
      return sendError(reply.header('WWW-Authenticate', 'Bearer'), contractError('auth.unauthorized', 'missing or wrong bearer token'));
    }
  });
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
