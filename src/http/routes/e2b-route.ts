import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { E2bErrorSchema } from '../../contract/e2b.js';
import { CodedError } from '../../contract/errors.js';
import type { Sandbox } from '../../contract/sandbox.js';
import type { SandboxHost } from '../../sandboxes/sandbox-host.js';
import { namedSchema, routeSchema } from '../route-schema.js';

/** Its failures in E2B's shape, its 401 too (auth.ts). */
export const E2B_ROUTE = { foreignErrors: true, e2b: true };
export const SandboxParams = routeSchema(Type.Object({ sandboxID: Type.String() }));
export type SandboxRoute = { Params: { sandboxID: string } };
export type E2bErrors = Record<number, unknown>;

/** The error statuses every route of E2B's control plane documents. */
export function e2bErrors(app: FastifyInstance): E2bErrors {
  const E2B_ERROR = namedSchema(app, E2bErrorSchema);
  return { 400: E2B_ERROR, 404: E2B_ERROR, 409: E2B_ERROR, 429: E2B_ERROR, 500: E2B_ERROR, 503: E2B_ERROR };
}

/** A sandbox that runs or is paused; an ended one (or one that failed: `error`) is, for E2B, not found. */
export async function known(sandboxes: SandboxHost, id: string): Promise<Sandbox> {
  const sandbox = await sandboxes.describe(id).catch((error: unknown) => {
    if (error instanceof CodedError && error.error.code === 'sandbox.not_found') return null;
    throw error;
  });
  if (sandbox === null || sandbox.state === 'ended' || sandbox.state === 'error') throw notFound(id);
  return sandbox;
}

/** A sandbox that runs; a paused one is refused with E2B's 409 (resume it through connect first). */
export async function running(sandboxes: SandboxHost, id: string): Promise<Sandbox> {
  const sandbox = await known(sandboxes, id);
  if (sandbox.state === 'paused') throw Object.assign(new Error(`sandbox ${id} is paused: connect to it to resume it first`), { statusCode: 409 });
  return sandbox;
}

function notFound(id: string): Error {
  return Object.assign(new Error(`sandbox ${JSON.stringify(id)} not found`), { statusCode: 404 });
}
