import type { FastifyInstance, FastifyRequest } from 'fastify';
import { CodedError, contractError } from '../contract/errors.js';
import { sandboxNotFound, type SandboxHost } from '../sandboxes/sandbox-host.js';
import { jobNotFound, type JobDesk } from '../jobs/job-desk.js';
import { visibleTo } from '../util/tenant.js';

/**
 * What an API key sees (service.apiKeys): the objects it made, run jobs, sessions, sandboxes
 * (paused ones too), their snapshots and forks; the service token (and a service without auth)
 * sees everything (util/tenant.ts). Another key's object is answered as one that does not
 * exist, so ids do not say whom they belong to. Each route group guards the id in its path
 * (guardOwnedRoutes), filters its lists with `sees` and makes what it makes for `creator`; a
 * snapshot's name is looked up among its key's own by the sandbox host (sandboxes/kept-sandboxes.ts).
 */
export function sees(request: FastifyRequest, owner: string | undefined): boolean {
  return visibleTo(creator(request), owner);
}

/** The key a create is made for: the object belongs to it (undefined: the service token). */
export function creator(request: FastifyRequest): string | undefined {
  return request.apiKey ?? undefined;
}

/**
 * Before a route with an object's id in `param` acts: `notFound`, the object's own not-found
 * error, to a key that did not make it. `ownerOf` reads the key that made it (and fails as the
 * route would for an id no one holds); the service token's requests skip the look.
 */
export function guardOwnedRoutes(app: FastifyInstance, param: string, ownerOf: (id: string) => Promise<string | undefined>, notFound: (id: string) => Error): void {
  app.addHook('preHandler', async (request) => {
    const id = (request.params as Record<string, string | undefined> | undefined)?.[param];
    if (request.apiKey === null || id === undefined) return;
    if (!sees(request, await ownerOf(id))) throw notFound(id);
  });
}

/** Before a route with a sandbox id in `param` acts: not found, to a key that did not make it. */
export function guardSandboxRoutes(app: FastifyInstance, sandboxes: SandboxHost, param: string): void {
  guardOwnedRoutes(app, param, async (id) => (await sandboxes.describe(id)).api_key, sandboxNotFound);
}

/** Before a route with a job id (`job_id`) acts: not found, to a key that did not submit it. */
export function guardJobRoutes(app: FastifyInstance, desk: JobDesk): void {
  guardOwnedRoutes(app, 'job_id', async (id) => (await desk.get(id)).api_key, jobNotFound);
}

/**
 * The routes of a plugin answer the service token only: what they tell (metrics) counts every
 * key's objects together, the operator's view, not a tenant's.
 */
export function serviceTokenOnly(app: FastifyInstance): void {
  app.addHook('preHandler', async (request) => {
    if (request.apiKey !== null)
      throw new CodedError(contractError('auth.forbidden', `${request.routeOptions.url ?? 'this route'} answers the service token only, not an API key`));
  });
}
