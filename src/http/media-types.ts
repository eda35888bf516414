import type { FastifyInstance, FastifyRequest } from 'fastify';
import { contractError } from '../contract/errors.js';
import { sendError } from './errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The media types a route takes its body in (`application/json`, `multipart/form-data`):
     * a body of any other type, or with no Content-Type, is answered 415 before it is read.
     * Unset: Fastify's parsers decide, as routes that speak another API's dialect need.
     * The OpenAPI document lists the same types as the route's request body (openapi.ts).
     */
    accepts?: readonly string[];
  }
}

/** The body of the JSON routes: the snippet, task and run-job contracts. */
export const JSON_BODY = ['application/json'] as const;

/**
 * Refuses a body the route did not opt in to, per route (`config.accepts`), rather than for the
 * whole service: a JSON route would otherwise take `text/plain` (Fastify parses it as a string,
 * then the schema names every field missing) or a body with no type at all. Checked on the
 * request's headers, so the body is never read; after authentication, so a caller without the
 * token learns nothing of the route.
 */
export function installMediaTypeGate(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    const accepted = request.routeOptions.config.accepts;
    if (accepted === undefined || !hasBody(request)) return;
    const given = mediaTypeOf(request.headers['content-type']);
    if (given !== null && accepted.includes(given)) return;
    return sendError(
      reply,
      contractError('request.unsupported_media_type', `${given === null ? 'a body without Content-Type' : `Content-Type ${given}`}: this route takes ${accepted.join(' or ')}`, {
        accepted,
        given,
      }),
    );
  });
}

/** As Fastify decides whether to parse one: a length above 0, or a chunked body. */
function hasBody(request: FastifyRequest): boolean {
  const { 'content-length': length, 'transfer-encoding': encoding } = request.headers;
  return encoding !== undefined || (length !== undefined && length !== '0');
}

/** The type/subtype of a Content-Type, parameters (charset, boundary) dropped; matched in any case (RFC 9110 8.3.1). */
function mediaTypeOf(header: string | undefined): string | null {
  const essence = header?.split(';')[0]?.trim().toLowerCase();
  return essence ? essence : null;
}
