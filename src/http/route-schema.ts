import type { TSchema } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { validate } from '../contract/validate.js';

/**
 * A contract schema as a route schema: plain JSON (TypeBox symbols dropped) and without $id,
 * so Fastify does not treat it as a shared schema to register once.
 */
export function routeSchema(schema: TSchema): Record<string, unknown> {
  const { $id: _id, ...rest } = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
  return rest;
}

/** The contract schemas routes refer to by name, by their $id. Contract schemas are constants. */
const named = new Map<string, TSchema>();

/**
 * A contract schema by name: a shared schema of `app` under its $id, referred to, so the OpenAPI
 * document lists a request or response body as its contract type (`RunJobRequest`) and a
 * generated client gets that type by that name.
 */
export function namedSchema(app: FastifyInstance, schema: TSchema): { $ref: string } {
  const id = schema.$id;
  if (id === undefined) throw new Error('a named route schema needs an $id');
  const known = named.get(id);
  if (known !== undefined && known !== schema) throw new Error(`two contract schemas are named ${id}`);
  named.set(id, schema);
  share(app, id, JSON.parse(JSON.stringify(schema)));
  return { $ref: `${id}#` };
}

/** A list of a named contract schema (E2B answers with bare arrays). */
export function namedList(app: FastifyInstance, schema: TSchema): { type: 'array'; items: { $ref: string } } {
  return { type: 'array', items: namedSchema(app, schema) };
}

/** Registers a schema of `app` under `id` once, each named schema inside it by reference. */
function share(app: FastifyInstance, id: string, plain: unknown): void {
  if (app.getSchema(id) === undefined) app.addSchema({ ...byName(app, plain), $id: id });
}

/**
 * The schema with each named schema inside it a reference too (a job's `result`, a workspace's
 * alternatives), so a client's types name them as well instead of repeating them inline.
 */
function byName(app: FastifyInstance, node: unknown): Record<string, unknown> {
  const walk = (value: unknown, nested: boolean): unknown => {
    if (Array.isArray(value)) return value.map((item) => walk(item, true));
    if (typeof value !== 'object' || value === null) return value;
    const { $id, ...rest } = value as Record<string, unknown>;
    if (nested && typeof $id === 'string') {
      share(app, $id, rest);
      return { $ref: `${$id}#` };
    }
    return Object.fromEntries(Object.entries(rest).map(([key, child]) => [key, walk(child, true)]));
  };
  return walk(node, false) as Record<string, unknown>;
}

/**
 * Fastify's validator for every route: ours, so a 422 names the field exactly as the library
 * and CLI do. A named schema is validated as the contract schema itself (validate() compiles
 * each once); text parts of a URL may stand for numbers.
 */
export function routeValidator({ schema, httpPart }: { schema: unknown; httpPart?: string }) {
  const ref = (schema as { $ref?: unknown }).$ref;
  const contract = typeof ref === 'string' ? named.get(ref.replace(/#$/, '')) : undefined;
  const checked = (contract ?? schema) as TSchema;
  const coerceTypes = httpPart === 'querystring' || httpPart === 'params';
  // A body of bytes (a file, an image archive read as a stream) is no JSON to check.
  if (httpPart === 'body' && typeof (checked as { contentMediaType?: unknown }).contentMediaType === 'string') return (data: unknown) => ({ value: data });
  return (data: unknown) => {
    // No body at all (a POST with none, as curl sends; Fastify hands it on as null) is the empty
    // object: a route whose fields are all optional takes it, one that needs a field names it.
    const value = httpPart === 'body' && (data === undefined || data === null) ? {} : data;
    const verdict = validate(checked, value, { coerceTypes });
    return verdict.ok ? { value } : { error: Object.assign(new Error(verdict.message), { validation: verdict.details, field: verdict.field }) };
  };
}
