import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { contractError } from '../contract/errors.js';
import { sendError } from './errors.js';
import { isDashboardRoute } from './routes/dashboard.js';

/** The routes that answer without the token; the OpenAPI document marks them so (openapi.ts). */
export const OPEN_ROUTES: ReadonlySet<string> = new Set(['/health']);

/** The scheme name is case-insensitive (RFC 9110 11.1): `bearer` and `BEARER` are Bearer. */
const BEARER = /^bearer +(\S+) *$/i;

/**
 * Every route but /health and the dashboard's files needs `Authorization: Bearer <token>`,
 * compared in constant time; unknown routes too (a 401, not a 404, to a caller without the token).
 */
export function installBearerAuth(app: FastifyInstance, token: string): void {
  const expected = digest(token);
  app.addHook('onRequest', async (request, reply) => {
    const route = request.routeOptions.url ?? '';
    if (OPEN_ROUTES.has(route) || isDashboardRoute(route)) return;
    const given = BEARER.exec(request.headers.authorization ?? '')?.[1] ?? '';
    // Equal-length digests: timingSafeEqual needs them, and the token length leaks nothing.
    if (!timingSafeEqual(digest(given), expected)) {
      return sendError(reply.header('WWW-Authenticate', 'Bearer'), contractError('auth.unauthorized', 'missing or wrong bearer token'));
    }
  });
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
