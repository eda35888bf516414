import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { VolumeCreateRequestSchema, VolumeDeleteQuerySchema, VolumeSchema, type VolumeCreateRequest } from '../../contract/volumes.js';
import type { SandboxHost } from '../../sandboxes/sandbox-host.js';
import { JSON_BODY } from '../media-types.js';
import { namedSchema, routeSchema } from '../route-schema.js';
import { creator } from '../api-key-scope.js';

const VolumeParams = routeSchema(Type.Object({ volume: Type.String({ description: 'its id or name' }) }));
const VolumeList = Type.Object({ volumes: Type.Array(VolumeSchema) }, { $id: 'VolumeList', additionalProperties: false });
type VolumeRoute = { Params: { volume: string } };

/**
 * Volumes (volumes/, docs/volumes.md) in our own contract, beside E2B's view of the same ones
 * (routes/e2b-volumes.ts). The sandbox host keeps them; each is its API key's, and the store
 * answers another key's as not found.
 */
export function volumeRoutes(sandboxes: SandboxHost) {
  return async (app: FastifyInstance) => {
    app.post<{ Body: VolumeCreateRequest }>(
      '/v1/volumes',
      {
        config: { accepts: JSON_BODY, errors: ['volume.exists', 'volume.full', 'sandbox.lost'] },
        schema: {
          summary: 'Make an empty volume of a fixed size, to mount in sandboxes (volume_mounts) and outlive them',
          body: namedSchema(app, VolumeCreateRequestSchema),
          response: { 201: namedSchema(app, VolumeSchema) },
        },
      },
      async (request, reply) => reply.code(201).send((await sandboxes.createVolume(request.body, creator(request))).volume),
    );

    app.get(
      '/v1/volumes',
      { config: { errors: ['sandbox.lost'] }, schema: { summary: 'The volumes of this machine', response: { 200: namedSchema(app, VolumeList) } } },
      async (request) => ({ volumes: await sandboxes.listVolumes(creator(request)) }),
    );

    app.get<VolumeRoute>(
      '/v1/volumes/:volume',
      {
        config: { errors: ['volume.not_found', 'sandbox.lost'] },
        schema: { summary: 'A volume: its size, what its files take, the sandboxes that mount it', params: VolumeParams, response: { 200: namedSchema(app, VolumeSchema) } },
      },
      async (request) => (await sandboxes.describeVolume(request.params.volume, creator(request))).volume,
    );

    app.delete<VolumeRoute & { Querystring: { force?: boolean } }>(
      '/v1/volumes/:volume',
      {
        config: { errors: ['volume.not_found', 'volume.in_use', 'sandbox.lost'] },
        schema: {
          summary: 'Delete a volume and its files (refused while running sandboxes mount it, unless forced)',
          params: VolumeParams,
          querystring: routeSchema(VolumeDeleteQuerySchema),
          response: { 200: namedSchema(app, VolumeSchema) },
        },
      },
      (request) => sandboxes.deleteVolume(request.params.volume, creator(request), request.query.force === true),
    );
  };
}
