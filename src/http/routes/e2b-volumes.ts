import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { E2bNewVolumeSchema, E2bVolumeAndTokenSchema, E2bVolumeSchema, type E2bNewVolume, type E2bVolumeAndToken } from '../../contract/e2b.js';
import type { SandboxHost } from '../../sandboxes/sandbox-host.js';
import type { VolumeGranted } from '../../sandboxes/sandbox-volumes.js';
import { namedList, namedSchema, routeSchema } from '../route-schema.js';
import { E2B_ROUTE } from './e2b-route.js';
import { creator } from '../api-key-scope.js';

const Params = routeSchema(Type.Object({ volumeID: Type.String() }));
type VolumeRoute = { Params: { volumeID: string } };

/**
 * E2B's volumes (spec/openapi.yml `/volumes`), registered inside e2bRoutes (its error handler
 * answers in E2B's dialect): the stock SDK's `Volume.create`, `getInfo`, `list` and `destroy`.
 * What a volume holds is E2B's volume content API (`/volumecontent/...`), served with the
 * sandboxes' traffic (envd/volume-content.ts).
 */
export function e2bVolumeRoutes(app: FastifyInstance, sandboxes: SandboxHost, errors: Record<number, unknown>): void {
  app.post<{ Body: E2bNewVolume }>(
    '/volumes',
    {
      config: E2B_ROUTE,
      schema: {
        summary: 'E2B: create a volume',
        tags: ['e2b'],
        body: namedSchema(app, E2bNewVolumeSchema),
        response: { 201: namedSchema(app, E2bVolumeAndTokenSchema), ...errors },
      },
    },
    async (request, reply) => reply.code(201).send(withToken(await sandboxes.createVolume({ name: request.body.name }, creator(request)))),
  );

  app.get(
    '/volumes',
    { config: E2B_ROUTE, schema: { summary: 'E2B: the volumes', tags: ['e2b'], response: { 200: namedList(app, E2bVolumeSchema), ...errors } } },
    async (request) => (await sandboxes.listVolumes(creator(request))).map(({ id, name }) => ({ volumeID: id, name })),
  );

  app.get<VolumeRoute>(
    '/volumes/:volumeID',
    {
      config: E2B_ROUTE,
      schema: { summary: 'E2B: a volume, with its content token', tags: ['e2b'], params: Params, response: { 200: namedSchema(app, E2bVolumeAndTokenSchema), ...errors } },
    },
    async (request) => withToken(await sandboxes.describeVolume(request.params.volumeID, creator(request))),
  );

  app.delete<VolumeRoute>(
    '/volumes/:volumeID',
    { config: E2B_ROUTE, schema: { summary: 'E2B: delete a volume', tags: ['e2b'], params: Params, response: { 204: Type.Null(), ...errors } } },
    async (request, reply) => {
      await sandboxes.deleteVolume(request.params.volumeID, creator(request));
      return reply.code(204).send();
    },
  );
}

function withToken({ volume, token }: VolumeGranted): E2bVolumeAndToken {
  return { volumeID: volume.id, name: volume.name, token };
}
