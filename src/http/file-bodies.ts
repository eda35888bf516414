import type { FastifyInstance } from 'fastify';

/** The media type of a file's bytes, in a request body or a response. */
export const OCTET_STREAM = 'application/octet-stream';

/** How the OpenAPI document shows a body that is a file's bytes. */
export const BYTES_SCHEMA = { type: 'string', contentMediaType: OCTET_STREAM };

/** The 200 of a route that answers with a file's bytes. */
export const FILE_RESPONSE = { description: 'The file’s bytes', content: { [OCTET_STREAM]: { schema: BYTES_SCHEMA } } };

/** Takes request bodies of OCTET_STREAM as a Buffer, up to `maxBytes` (past it: 413 request.too_large), in the plugin `app` is. */
export function acceptFileBodies(app: FastifyInstance, maxBytes: number): void {
  app.addContentTypeParser(OCTET_STREAM, { parseAs: 'buffer', bodyLimit: maxBytes }, (_request, body, done) => done(null, body));
}
