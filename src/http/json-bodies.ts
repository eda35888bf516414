import type { FastifyInstance } from 'fastify';
import { CodedError, contractError } from '../contract/errors.js';
import { jsonBoundsExceeded } from '../contract/json-bounds.js';

const JSON_MEDIA_TYPE = 'application/json';

/**
 * Fastify's JSON parser (its prototype-poisoning checks kept) behind a count of the body's values
 * and depth over its text: a body within the byte limit but of millions of items is refused
 * (413, or 422 too deep) before an object is built, so that no request holds the event loop
 * every other client shares. Registered on the root instance, every route group inherits it.
 */
export function boundJsonBodies(app: FastifyInstance, maxValues: number): void {
  const { onProtoPoisoning, onConstructorPoisoning } = app.initialConfig;
  const parse = app.getDefaultJsonParser(onProtoPoisoning ?? 'error', onConstructorPoisoning ?? 'error');
  app.removeContentTypeParser(JSON_MEDIA_TYPE);
  app.addContentTypeParser(JSON_MEDIA_TYPE, { parseAs: 'string' }, (request, body, done) => {
    // parseAs 'string': the body is text.
    const text = body as string;
    const exceeded = jsonBoundsExceeded(text, maxValues);
    if (exceeded) return done(new CodedError(contractError(exceeded.code, exceeded.message, exceeded.details)), undefined);
    parse(request, text, done);
  });
}
