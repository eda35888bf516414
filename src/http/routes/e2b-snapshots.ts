import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import {
  E2bSnapshotInfoSchema,
  E2bSnapshotQuerySchema,
  E2bSnapshotRequestSchema,
  E2bTemplateAliasSchema,
  type E2bSnapshotInfo,
  type E2bSnapshotQuery,
} from '../../contract/e2b.js';
import type { Snapshot } from '../../contract/sandbox.js';
import type { SandboxHost } from '../../sandboxes/sandbox-host.js';
import type { ServedTemplates } from './templates.js';
import { namedList, namedSchema, routeSchema } from '../route-schema.js';
import { creator, sees } from '../api-key-scope.js';
import { e2bError } from './e2b-errors.js';
import { DEFAULT_PAGE, pageOf } from './e2b-paging.js';
import { E2B_ROUTE, running, SandboxParams, type E2bErrors, type SandboxRoute } from './e2b-route.js';

/**
 * E2B's snapshots, registered inside e2bRoutes (its error handler answers in E2B's dialect):
 * `sandbox.createSnapshot`, `Sandbox.listSnapshots`, and the template routes that find one by
 * name (`Template.exists`) and delete it (`Sandbox.deleteSnapshot`), a snapshot being a template
 * to E2B.
 */
export function e2bSnapshotRoutes(app: FastifyInstance, sandboxes: SandboxHost, templates: ServedTemplates, errors: E2bErrors): void {
  app.post<SandboxRoute & { Body: { name?: string } | undefined }>(
    '/sandboxes/:sandboxID/snapshots',
    {
      config: E2B_ROUTE,
      schema: {
        summary: 'E2B: keep a running sandbox’s state as a snapshot, a template new sandboxes start from',
        tags: ['e2b'],
        params: SandboxParams,
        body: namedSchema(app, E2bSnapshotRequestSchema),
        response: { 201: namedSchema(app, E2bSnapshotInfoSchema), ...errors },
      },
    },
    async (request, reply) => {
      const { id } = await running(sandboxes, request.params.sandboxID);
      const name = request.body?.name;
      return reply.code(201).send(snapshotInfo(await sandboxes.snapshot(id, name === undefined ? {} : { name })));
    },
  );

  app.get<{ Querystring: E2bSnapshotQuery }>(
    '/snapshots',
    {
      config: E2B_ROUTE,
      schema: {
        summary: 'E2B: the snapshots, a page at a time (`x-next-token`)',
        tags: ['e2b'],
        querystring: routeSchema(E2bSnapshotQuerySchema),
        response: { 200: namedList(app, E2bSnapshotInfoSchema), ...errors },
      },
    },
    async (request, reply) => {
      const { sandboxID, name, limit = DEFAULT_PAGE, nextToken } = request.query;
      const snapshots = await sandboxes.listSnapshots({ ...(sandboxID === undefined ? {} : { sandbox_id: sandboxID }), ...(name === undefined ? {} : { name }) });
      return pageOf(
        snapshots.filter((snapshot) => sees(request, snapshot.api_key)),
        (snapshot) => `${snapshot.created_at}/${snapshot.id}`,
        { limit, nextToken },
        reply,
      ).map(snapshotInfo);
    },
  );

  app.get<{ Params: { alias: string } }>(
    '/templates/aliases/:alias',
    {
      config: E2B_ROUTE,
      schema: {
        summary: 'E2B: whether a template of that name exists: one of the server (public) or a snapshot the caller sees',
        tags: ['e2b'],
        params: routeSchema(Type.Object({ alias: Type.String() })),
        response: { 200: namedSchema(app, E2bTemplateAliasSchema), ...errors },
      },
    },
    async (request, reply) => {
      const { alias } = request.params;
      if (templates.configured.includes(alias) || (await templates.images.lookup(alias))) return { templateID: alias, public: true };
      const snapshot = (await sandboxes.listSnapshots({ name: alias })).find((kept) => sees(request, kept.api_key));
      if (snapshot) return { templateID: snapshot.id, public: false };
      return e2bError(reply, 404, `template ${JSON.stringify(alias)} not found`);
    },
  );

  app.delete<{ Params: { templateID: string } }>(
    '/templates/:templateID',
    {
      config: E2B_ROUTE,
      schema: {
        summary: 'E2B: delete a snapshot (templates of the configuration are not deleted here)',
        tags: ['e2b'],
        params: routeSchema(Type.Object({ templateID: Type.String() })),
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (request, reply) => {
      await sandboxes.deleteSnapshot(request.params.templateID, creator(request));
      return reply.code(204).send();
    },
  );
}

function snapshotInfo(snapshot: Snapshot): E2bSnapshotInfo {
  return { snapshotID: snapshot.id, names: snapshot.name === null ? [] : [snapshot.name] };
}
