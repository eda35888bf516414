import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { contractError } from '../contract/errors.js';
import { sendError } from './errors.js';
import { isDashboardRoute } from './routes/dashboard.js';

/**
 * The routes that answer without the token; the OpenAPI document marks them so (openapi.ts). A
 * template build's upload checks the signature of its URL instead (routes/e2b-templates.ts).
 */
export const OPEN_ROUTES: ReadonlySet<string> = new Set(['/health', '/templates/:templateID/files/:hash/upload']);

/** The scheme name is case-insensitive (RFC 9110 11.1): `bearer` and `BEARER` are Bearer. */
const BEARER = /^bearer +(\S+) *$/i;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route is E2B's (routes/e2b.ts): a 401 is answered in E2B's shape, `{code, message}`. */
    e2b?: boolean;
  }
  interface FastifyRequest {
    /** The name of the API key the request came with (service.apiKeys); null: the service token, or no auth. */
    apiKey: string | null;
  }
}

/**
 * Every route but /health and the dashboard's files needs the token or one of the API keys,
 * compared in constant time; unknown routes too (a 401, not a 404, to a caller without one). It
 * comes as `Authorization: Bearer <token>`, or as `X-API-Key: <token>`, which is how E2B's SDKs
 * send their key. The request keeps the name of the key it came with (`request.apiKey`).
 */
export function installBearerAuth(app: FastifyInstance, token: string, apiKeys: Readonly<Record<string, { key: string }>> = {}): void {
  const expected = digest(token);
  const keys = Object.entries(apiKeys).map(([name, { key }]) => ({ name, digest: digest(key) }));
  app.addHook('onRequest', async (request, reply) => {
    const route = request.routeOptions.url ?? '';
    if (OPEN_ROUTES.has(route) || isDashboardRoute(route)) return;
    const apiKey = request.headers['x-api-key'];
    const given = digest(BEARER.exec(request.headers.authorization ?? '')?.[1] ?? (typeof apiKey === 'string' ? apiKey : ''));
    // Equal-length digests: timingSafeEqual needs them, and the token length leaks nothing. Every
    // key is compared, so the time does not say which one matched.
    const matched = keys.filter((candidate) => timingSafeEqual(given, candidate.digest));
    if (timingSafeEqual(given, expected)) return;
    if (matched[0]) {
      request.apiKey = matched[0].name;
      return;
    }
    const message = 'missing or wrong token (Authorization: Bearer, or X-API-Key)';
    if (request.routeOptions.config.e2b) return reply.code(401).send({ code: 401, message });
    return sendError(reply.header('WWW-Authenticate', 'Bearer'), contractError('auth.unauthorized', message));
  });
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
