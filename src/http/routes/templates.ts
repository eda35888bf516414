import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { creator, sees } from '../api-key-scope.js';
import type { Readable } from 'node:stream';
import { CodedError, contractError } from '../../contract/errors.js';
import { TemplateCreateRequestSchema, TemplateListSchema, TemplateSchema, type Template, type TemplateCreateRequest } from '../../contract/templates.js';
import type { E2bTemplateBuilds } from '../../templates/e2b-builds.js';
import type { ImageTemplate } from '../../templates/image-template.js';
import { otherKeys, type TemplateRegistry } from '../../templates/template-registry.js';
import { JSON_BODY } from '../media-types.js';
import { namedSchema, routeSchema } from '../route-schema.js';

/** The media type of an image archive sent whole (docker save, or an OCI layout as a tar). */
export const IMAGE_ARCHIVE = 'application/x-tar';

/** What the service has to make sandboxes of: its host templates, and the images made into templates. */
export interface ServedTemplates {
  /** base, code-interpreter-v1, desktop and the configuration's, which are the host's own system. */
  configured: readonly string[];
  images: TemplateRegistry;
  /** E2B's template builds over the same registry (`Template.build`). */
  builds: E2bTemplateBuilds;
}

const TemplateParams = routeSchema(Type.Object({ name: Type.String() }));
const IMAGE_ERRORS = [
  'validation.invalid_request',
  'auth.forbidden',
  'image.invalid_reference',
  'image.not_found',
  'image.registry_denied',
  'image.registry_failed',
  'image.insecure_registry',
  'image.digest_mismatch',
  'image.too_large',
  'image.invalid',
  'image.unsupported',
] as const;

/**
 * Templates: listed, made of an image (pulled by reference, or sent as an archive) and deleted.
 * Every key sees every template (a server's templates are public, as E2B's base is).
 */
export function templateRoutes(templates: ServedTemplates) {
  return async (app: FastifyInstance) => {
    // An archive is read as it comes, never held whole: it may be gigabytes.
    app.addContentTypeParser(IMAGE_ARCHIVE, (_request, payload, done) => done(null, payload));

    app.get(
      '/v1/templates',
      { schema: { summary: 'Templates sandboxes are made from: the host’s own, and those made of images', response: { 200: namedSchema(app, TemplateListSchema) } } },
      async () => ({
        templates: [...templates.configured.map((name): Template => ({ name, kind: 'host' })), ...(await templates.images.listAll()).map(imageTemplate)],
      }),
    );

    app.post<{ Body: TemplateCreateRequest }>(
      '/v1/templates',
      {
        config: { accepts: JSON_BODY, errors: [...IMAGE_ERRORS] },
        schema: {
          summary: 'Make (or replace) a template of an image pulled from its registry; layers already here are not pulled again',
          body: namedSchema(app, TemplateCreateRequestSchema),
          response: { 201: namedSchema(app, TemplateSchema) },
        },
      },
      async (request, reply) => {
        mayChange(templates, request, request.body.name);
        return reply.code(201).send(imageTemplate(await templates.images.fromReference(request.body.name, request.body.image, creator(request))));
      },
    );

    app.put<{ Params: { name: string }; Body: Readable }>(
      '/v1/templates/:name',
      {
        config: { accepts: [IMAGE_ARCHIVE], errors: [...IMAGE_ERRORS] },
        schema: {
          summary: 'Make (or replace) a template of an image archive sent as the body: docker save output, or an OCI image layout as a tar',
          params: TemplateParams,
          body: { type: 'string', contentMediaType: IMAGE_ARCHIVE },
          response: { 201: namedSchema(app, TemplateSchema) },
        },
      },
      async (request, reply) => {
        mayChange(templates, request, request.params.name);
        return reply.code(201).send(imageTemplate(await templates.images.fromArchive(request.params.name, request.body, `${request.params.name}.tar`, creator(request))));
      },
    );

    app.get<{ Params: { name: string } }>(
      '/v1/templates/:name',
      { config: { errors: ['template.not_found'] }, schema: { summary: 'One template', params: TemplateParams, response: { 200: namedSchema(app, TemplateSchema) } } },
      async (request) => {
        const { name } = request.params;
        if (templates.configured.includes(name)) return { name, kind: 'host' };
        const found = await templates.images.lookup(name);
        if (!found) throw notFound(name);
        return imageTemplate(found);
      },
    );

    app.delete<{ Params: { name: string } }>(
      '/v1/templates/:name',
      {
        config: { errors: ['template.not_found', 'auth.forbidden', 'validation.invalid_request'] },
        schema: { summary: 'Delete a template made of an image, and the layers no other template holds', params: TemplateParams, response: { 204: Type.Null() } },
      },
      async (request, reply) => {
        mayChange(templates, request, request.params.name);
        const deleted = await templates.images.delete(request.params.name);
        if (!deleted) throw notFound(request.params.name);
        // Its layers go once no pull, import or build on the store is under way: not waited for.
        deleted.layersGone.catch((error: Error) => request.log.error({ err: error }, `the layers of template ${request.params.name} were not removed`));
        return reply.code(204).send();
      },
    );
  };
}

function imageTemplate(template: ImageTemplate): Template {
  return { ...template, kind: 'image' };
}

/**
 * Whether the caller may make, replace or delete template `name`: not one of the configuration's
 * (the host's system), and not one another API key made (every key sees every template; only the
 * one that made it, or the service token, changes it).
 */
function mayChange(templates: ServedTemplates, request: FastifyRequest, name: string): void {
  if (templates.configured.includes(name))
    throw new CodedError(
      contractError('validation.invalid_request', `template ${JSON.stringify(name)} is one of the configuration's (the host's system): choose another name`, { field: 'name' }),
    );
  const existing = templates.images.get(name);
  if (existing && !sees(request, existing.api_key)) throw otherKeys(name);
}

function notFound(name: string): CodedError {
  return new CodedError(contractError('template.not_found', `no template ${JSON.stringify(name)}`, { template: name }));
}
