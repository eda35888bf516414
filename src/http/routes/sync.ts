import { Type } from '@sinclair/typebox';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SyncQuerySchema, SyncReportSchema, type SyncQuery } from '../../contract/tree-sync.js';
import type { SandboxHost } from '../../sandboxes/sandbox-host.js';
import { forward } from '../../util/http-forward.js';
import { sendJson } from '../../util/http-messages.js';
import { creator, guardSandboxRoutes } from '../api-key-scope.js';
import { namedSchema, routeSchema } from '../route-schema.js';

/** A sync in's body: a tar stream, gzipped where it says so (Content-Encoding: gzip, or application/gzip). */
const TAR_BODIES = ['application/x-tar', 'application/gzip'];
const SandboxParams = routeSchema(Type.Object({ sandbox_id: Type.String() }));
const VolumeParams = routeSchema(Type.Object({ volume: Type.String({ description: 'its id or name' }) }));
const Query = routeSchema(SyncQuerySchema);
const TAR_ANSWER = {
  description: 'The tree as a tar stream (gzipped with compress=gzip), ended by the trailer X-Agent-Runner-Sync: what was moved and which budget stopped it, as a SyncReport.',
  content: { 'application/x-tar': { schema: { type: 'string', format: 'binary' } }, 'application/gzip': { schema: { type: 'string', format: 'binary' } } },
};
type SandboxSync = { Params: { sandbox_id: string }; Querystring: SyncQuery };
type VolumeSync = { Params: { volume: string }; Querystring: SyncQuery };

/**
 * Bulk sync (sandboxes/tree-sync.ts): a directory tree into or out of a sandbox or a volume as
 * one tar stream. Auth and ownership are checked here; the stream itself goes to the worker's
 * sync socket byte for byte, never held here.
 */
export function syncRoutes(sandboxes: SandboxHost) {
  return async (app: FastifyInstance) => {
    // Read as it comes by the worker, never here: a tree may be gigabytes.
    for (const type of TAR_BODIES) app.addContentTypeParser(type, (_request, _payload, done) => done(null));
    guardSandboxRoutes(app, sandboxes, 'sandbox_id');
    const errorsIn = ['sandbox.not_found', 'sandbox.lost', 'volume.not_found'] as const;

    /** A sync in's route options: a tar body in, its report out. */
    const syncInRoute = (summary: string, params: typeof SandboxParams | typeof VolumeParams) => ({
      config: { accepts: TAR_BODIES, errors: [...errorsIn] },
      schema: { summary, params, querystring: Query, body: { type: 'string', contentMediaType: 'application/x-tar' }, response: { 200: namedSchema(app, SyncReportSchema) } },
    });

    app.put<SandboxSync>(
      '/v1/sandboxes/:sandbox_id/sync',
      syncInRoute('Sync a tree into the sandbox: a tar stream unpacked at `path` as its user, entry by entry, within budgets', SandboxParams),
      (request, reply) => toWorker(sandboxes, request, reply, `/v1/sandboxes/${request.params.sandbox_id}/sync`),
    );
    app.get<SandboxSync>(
      '/v1/sandboxes/:sandbox_id/sync',
      {
        config: { errors: [...errorsIn] },
        schema: { summary: 'Sync a tree out of the sandbox: `path` as a tar stream, within budgets', params: SandboxParams, querystring: Query, response: { 200: TAR_ANSWER } },
      },
      (request, reply) => toWorker(sandboxes, request, reply, `/v1/sandboxes/${request.params.sandbox_id}/sync`),
    );
    app.put<VolumeSync>('/v1/volumes/:volume/sync', syncInRoute('Sync a tree into a volume, as into a sandbox', VolumeParams), async (request, reply) =>
      toWorker(sandboxes, request, reply, `/v1/volumes/${await volumeId(sandboxes, request)}/sync`),
    );
    app.get<VolumeSync>(
      '/v1/volumes/:volume/sync',
      {
        config: { errors: [...errorsIn] },
        schema: { summary: 'Sync a tree out of a volume, as out of a sandbox', params: VolumeParams, querystring: Query, response: { 200: TAR_ANSWER } },
      },
      async (request, reply) => toWorker(sandboxes, request, reply, `/v1/volumes/${await volumeId(sandboxes, request)}/sync`),
    );
  };
}

/** The caller's volume by id or name (volume.not_found for another key's). */
async function volumeId(sandboxes: SandboxHost, request: FastifyRequest<VolumeSync>): Promise<string> {
  return (await sandboxes.describeVolume(request.params.volume, creator(request))).volume.id;
}

function toWorker(sandboxes: SandboxHost, request: FastifyRequest, reply: FastifyReply, path: string): void {
  const socketPath = sandboxes.syncSocket();
  if (socketPath === null) return void reply.code(503).send({ error: { code: 'backend.unavailable', message: 'the sandbox host is starting' } });
  reply.hijack();
  const query = request.raw.url?.split('?')[1];
  request.raw.url = query === undefined ? path : `${path}?${query}`;
  forward(
    request.raw,
    reply.raw,
    { socketPath },
    request.raw.headers,
    (response, said) => sendJson(response, 502, { error: { code: 'internal.error', message: `the sandbox host did not answer: ${said}` } }),
    'keep',
  );
}

const SYNC_IN = /^\/v1\/(?:sandboxes|volumes)\/[^/?]+\/sync(?:\?|$)/;

/** A sync in: its body is bounded by its own timeout budget, not by the clients' request deadline. */
export function isSyncIn(request: IncomingMessage): boolean {
  return request.method === 'PUT' && SYNC_IN.test(request.url ?? '');
}
