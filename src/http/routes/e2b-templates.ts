import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Readable } from 'node:stream';
import {
  E2bAssignedTagsSchema,
  E2bAssignTagsRequestSchema,
  E2bBuildStatusQuerySchema,
  E2bDeleteTagsRequestSchema,
  E2bTemplateTagSchema,
  type E2bAssignTagsRequest,
  type E2bDeleteTagsRequest,
  E2bErrorSchema,
  E2bTemplateBuildFileUploadSchema,
  E2bTemplateBuildInfoSchema,
  E2bTemplateBuildRequestSchema,
  E2bTemplateBuildStartSchema,
  E2bTemplateRequestResponseSchema,
  type E2bTemplateBuildRequest,
  type E2bTemplateBuildStart,
} from '../../contract/e2b.js';
import type { E2bTemplateBuilds } from '../../templates/e2b-builds.js';
import type { TemplateRegistry } from '../../templates/template-registry.js';
import { keyParts } from '../../templates/template-reference.js';
import { creator } from '../api-key-scope.js';
import { namedList, namedSchema, routeSchema } from '../route-schema.js';
import { E2B_ROUTE } from './e2b-route.js';

/** The signed upload of a build's files: no key, its signature instead (auth.ts OPEN_ROUTES). */
export const BUILD_UPLOAD_ROUTE = '/templates/:templateID/files/:hash/upload';

/**
 * E2B's template builds, as the `e2b` SDK's `Template.build()` and `getBuildStatus()` drive them:
 * ask for a build, upload the files of its COPY steps to the signed URL it is given, start it
 * with its steps, poll its status and logs. The builds themselves: templates/e2b-builds.ts. And
 * its tags (`Template.assignTags`, `removeTags`, `getTags`), kept by the template registry.
 */
export function e2bTemplateRoutes(builds: E2bTemplateBuilds, templates: TemplateRegistry) {
  return async (app: FastifyInstance) => {
    const E2B_ERROR = namedSchema(app, E2bErrorSchema);
    const errors = { 400: E2B_ERROR, 403: E2B_ERROR, 404: E2B_ERROR, 500: E2B_ERROR };
    const BuildParams = routeSchema(Type.Object({ templateID: Type.String(), buildID: Type.String() }));
    // A build's files come as the SDK sends them (a tar, gzip'ed or not, with or without a type): read as a stream.
    app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

    app.post<{ Body: E2bTemplateBuildRequest }>(
      '/v3/templates',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: ask for a template build',
          tags: ['e2b'],
          body: namedSchema(app, E2bTemplateBuildRequestSchema),
          response: { 202: namedSchema(app, E2bTemplateRequestResponseSchema), ...errors },
        },
      },
      async (request, reply) => {
        const name = request.body.name ?? request.body.alias;
        if (!name) return reply.code(400).send({ code: 400, message: 'a template build needs a name' });
        return reply.code(202).send(builds.request(name, request.body.tags ?? [], creator(request)));
      },
    );

    app.get<{ Params: { templateID: string; hash: string } }>(
      '/templates/:templateID/files/:hash',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: whether a build’s files are here, and where to upload them if not',
          tags: ['e2b'],
          params: routeSchema(Type.Object({ templateID: Type.String(), hash: Type.String() })),
          response: { 201: namedSchema(app, E2bTemplateBuildFileUploadSchema), ...errors },
        },
      },
      async (request, reply) => {
        const { present, path } = builds.fileUpload(request.params.templateID, request.params.hash);
        return reply.code(201).send({ present, ...(path && { url: `${request.protocol}://${request.host}${path}` }) });
      },
    );

    app.put<{ Params: { templateID: string; hash: string }; Querystring: { signature?: string } }>(
      BUILD_UPLOAD_ROUTE,
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: the upload of a build’s files (a tar) to the signed URL the server gave',
          tags: ['e2b'],
          params: routeSchema(Type.Object({ templateID: Type.String(), hash: Type.String() })),
          querystring: routeSchema(Type.Object({ signature: Type.Optional(Type.String()) })),
          response: { 200: Type.Null(), ...errors },
        },
      },
      async (request, reply) => {
        await builds.storeUpload(request.params.hash, request.query.signature ?? '', (request.body as Readable | undefined) ?? request.raw);
        return reply.code(200).send();
      },
    );

    app.post<{ Params: { templateID: string; buildID: string }; Body: E2bTemplateBuildStart }>(
      '/v2/templates/:templateID/builds/:buildID',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: start a template build with its steps',
          tags: ['e2b'],
          params: BuildParams,
          body: namedSchema(app, E2bTemplateBuildStartSchema),
          response: { 202: Type.Null(), ...errors },
        },
      },
      async (request, reply) => {
        builds.start(request.params.templateID, request.params.buildID, request.body, creator(request));
        return reply.code(202).send();
      },
    );

    app.get<{ Params: { templateID: string; buildID: string }; Querystring: { logsOffset?: number } }>(
      '/templates/:templateID/builds/:buildID/status',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: a template build’s status and its log lines from logsOffset on',
          tags: ['e2b'],
          params: BuildParams,
          querystring: routeSchema(E2bBuildStatusQuerySchema),
          response: { 200: namedSchema(app, E2bTemplateBuildInfoSchema), ...errors },
        },
      },
      async (request) => builds.status(request.params.templateID, request.params.buildID, request.query.logsOffset ?? 0),
    );

    app.post<{ Body: E2bAssignTagsRequest }>(
      '/templates/tags',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: give tags the image a template tag (`name:tag`) has now',
          tags: ['e2b'],
          body: namedSchema(app, E2bAssignTagsRequestSchema),
          response: { 201: namedSchema(app, E2bAssignedTagsSchema), ...errors },
        },
      },
      async (request, reply) => {
        const target = await templates.assignTags(request.body.target, request.body.tags, creator(request));
        return reply.code(201).send({ buildID: target.build_id ?? target.image, tags: request.body.tags });
      },
    );

    app.delete<{ Body: E2bDeleteTagsRequest }>(
      '/templates/tags',
      {
        config: E2B_ROUTE,
        schema: { summary: 'E2B: remove tags of a template', tags: ['e2b'], body: namedSchema(app, E2bDeleteTagsRequestSchema), response: { 204: Type.Null(), ...errors } },
      },
      async (request, reply) => {
        await templates.removeTags(request.body.name, request.body.tags, creator(request));
        return reply.code(204).send();
      },
    );

    app.get<{ Params: { templateID: string } }>(
      '/templates/:templateID/tags',
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: the tags of a template',
          tags: ['e2b'],
          params: routeSchema(Type.Object({ templateID: Type.String() })),
          response: { 200: namedList(app, E2bTemplateTagSchema), ...errors },
        },
      },
      async (request) =>
        (await templates.tagsOf(request.params.templateID)).map((template) => ({
          tag: keyParts(template.name).tag,
          buildID: template.build_id ?? template.image,
          createdAt: template.created_at,
        })),
    );
  };
}
