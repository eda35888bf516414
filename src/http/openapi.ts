import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import type { FastifySchema, RouteOptions } from 'fastify';
import { ERROR_CODES, type ErrorCode } from '../contract/errors.js';
import { ErrorBodySchema } from '../contract/service.js';
import { OPEN_ROUTES } from './auth.js';
import { forGeneratedClients } from './openapi-clients.js';
import { routeSchema } from './route-schema.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The error codes a route answers with beyond those any route may (ANY_ROUTE) and those its
     * schema and `accepts` imply (422, 415), for the OpenAPI document; the status comes from the
     * code table, unless the route sends the code with another (`[code, status]`).
     */
    errors?: readonly RouteError[];
    /**
     * The route speaks another API's dialect (Piston's) and answers its own failures in that
     * API's shape, as its schema documents them: only the 401 of our auth, before it, is ours.
     */
    foreignErrors?: boolean;
    /** The fields of a multipart/form-data body the route accepts beside JSON, as a schema. */
    form?: Record<string, unknown>;
  }
}

export type RouteError = ErrorCode | readonly [ErrorCode, number];

/**
 * What any request may be answered with: a client failing at HTTP itself (client-errors.ts),
 * headers over the limit, and the service's own failure.
 */
const ANY_ROUTE: readonly ErrorCode[] = ['request.malformed', 'request.timeout', 'request.too_large', 'internal.error'];

const ERROR_BODY = '#/components/schemas/ErrorBody';
/** Registered by the E2B routes, whose answers carry it (routes/e2b-route.ts). */
const E2B_ERROR_BODY = '#/components/schemas/E2bError';

/** Headers that come with an error status, whichever code it carries. */
const ERROR_HEADERS: Record<number, Record<string, { description: string; type: string }>> = {
  401: { 'WWW-Authenticate': { description: 'Bearer', type: 'string' } },
  503: { 'Retry-After': { description: 'seconds after which a retry may be admitted (absent with queue.closed: the service is stopping)', type: 'integer' } },
};

/**
 * The OpenAPI document /openapi.json serves, derived from the routes: their contract schemas,
 * and per route the statuses it can answer with, each listing its codes from the code table.
 * OpenAPI 3.1, whose schemas are JSON Schema 2020-12 as TypeBox writes them (3.0 would need
 * boolean exclusiveMinimum, nullable for null, no const). The bearer scheme is always declared,
 * and required where auth.ts requires it when the service has a token.
 */
export function openapiOptions(token: string | null): FastifyDynamicSwaggerOptions {
  const open = [...OPEN_ROUTES].join(', ');
  return {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'agent-runner', version: '0.1.0', description: 'Run jobs and snippets in a sandbox.', license: { name: 'MIT', identifier: 'MIT' } },
      // The service itself, at whatever address the document was fetched from.
      servers: [{ url: '/' }],
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description: `The service token, on every route but ${open}; the service generates one on first start unless given one. Not required only when the service runs with --no-auth (loopback only).`,
          },
        },
        schemas: { ErrorBody: routeSchema(ErrorBodySchema) },
      },
      ...(token ? { security: [{ bearer: [] }] } : {}),
    },
    transform: ({ schema, url, route }) => ({ schema: documented(schema, route, token !== null), url: namedWildcard(url) }),
    // A shared schema is a component under its contract name (`SandboxCodeResult`), as generated
    // clients name their types after it; the plugin's own names are `def-0`, `def-1`...
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, index) => (typeof json.$id === 'string' ? json.$id : `Schema${index}`) },
    // What clients generated from the document need beyond the contract schemas (openapi-clients.ts).
    transformObject: (documentObject) => ('openapiObject' in documentObject ? forGeneratedClients(documentObject.openapiObject) : documentObject.swaggerObject),
  };
}

function documented(schema: FastifySchema | undefined, route: RouteOptions, authenticated: boolean): FastifySchema {
  const { accepts, errors = [], foreignErrors = false, form } = route.config ?? {};
  const secured = authenticated && !OPEN_ROUTES.has(route.url);
  const codes = new Map<number, Set<ErrorCode>>();
  const add = (code: ErrorCode, status: number = ERROR_CODES[code].http) => codes.set(status, (codes.get(status) ?? new Set()).add(code));
  // E2B's routes answer even our auth's 401 in their dialect (auth.ts).
  const e2bUnauthorized =
    secured && route.config?.e2b ? { 401: { description: 'missing or wrong token', content: { 'application/json': { schema: { $ref: E2B_ERROR_BODY } } } } } : {};
  if (secured && !route.config?.e2b) add('auth.unauthorized');
  // A route in another API's dialect documents its own failures; only our auth, before it, is ours.
  if (!foreignErrors) {
    for (const code of ANY_ROUTE) add(code);
    // A query or a body can fail its schema, and any body JSON.parse (our path parameters are strings).
    if (schema?.body || schema?.querystring || [route.method].flat().includes('POST')) add('validation.invalid_request');
    if (accepts) add('request.unsupported_media_type');
    for (const entry of errors) {
      if (typeof entry === 'string') add(entry);
      else add(...entry);
    }
  }
  const responses: Record<string, unknown> = { ...(schema?.response as Record<string, unknown> | undefined), ...errorResponses(codes), ...e2bUnauthorized };
  return {
    operationId: operationIdOf(route),
    ...schema,
    ...(schema?.params ? { params: namedWildcardParams(schema.params) } : {}),
    ...(schema?.body && accepts ? mediaTypes(schema.body, accepts, form) : {}),
    ...(authenticated && !secured ? { security: [] } : {}),
    response: responses,
  };
}

/** A body in each media type the route accepts: the schema, or a form's own fields for multipart. */
function mediaTypes(body: unknown, accepts: readonly string[], form: Record<string, unknown> | undefined): Pick<FastifySchema, 'body'> | { consumes: readonly string[] } {
  if (!form) return { consumes: accepts };
  const content = Object.fromEntries(accepts.map((type) => [type, { schema: type === 'multipart/form-data' ? form : body }]));
  return { body: { content } };
}

function errorResponses(codes: Map<number, Set<ErrorCode>>): Record<string, unknown> {
  return Object.fromEntries([...codes].sort(([a], [b]) => a - b).map(([status, carried]) => [status, errorResponse(status, [...carried])]));
}

function errorResponse(status: number, codes: ErrorCode[]) {
  return {
    description: codes.map((code) => `- \`${code}\`: ${ERROR_CODES[code].description}`).join('\n'),
    ...(ERROR_HEADERS[status] ? { headers: ERROR_HEADERS[status] } : {}),
    content: { 'application/json': { schema: { $ref: ERROR_BODY } } },
  };
}

/** Fastify's wildcard `*` is an artifact's path on our routes: `{path}` in the document. */
/**
 * A route's operationId, from its method and path (`GET /v1/jobs/:job_id` -> getV1JobsByJobId):
 * unique as they are, and stable while the route is; a route's schema may name its own.
 */
function operationIdOf(route: RouteOptions): string {
  const method = (Array.isArray(route.method) ? route.method[0]! : route.method).toLowerCase();
  const words = namedWildcard(route.url)
    .split('/')
    .filter(Boolean)
    .map((segment) => (segment.startsWith(':') ? `by_${segment.slice(1)}` : segment));
  const camel = words.flatMap((word) => word.split(/[^A-Za-z0-9]+/)).filter(Boolean);
  return method + camel.map((part) => part[0]!.toUpperCase() + part.slice(1)).join('');
}

function namedWildcard(url: string): string {
  return url.endsWith('/*') ? `${url.slice(0, -1)}:path` : url;
}

function namedWildcardParams(params: unknown): unknown {
  const { properties, required, ...rest } = params as { properties: Record<string, unknown>; required?: string[] };
  if (!('*' in properties)) return params;
  const { '*': wildcard, ...named } = properties;
  return { ...rest, properties: { ...named, path: wildcard }, required: required?.map((name) => (name === '*' ? 'path' : name)) };
}
