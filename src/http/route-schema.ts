import type { TSchema } from '@sinclair/typebox';

/**
 * A contract schema as a route schema: plain JSON (TypeBox symbols dropped) and without $id,
 * so Fastify does not treat it as a shared schema to register once.
 */
export function routeSchema(schema: TSchema): Record<string, unknown> {
  const { $id: _id, ...rest } = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
  return rest;
}
