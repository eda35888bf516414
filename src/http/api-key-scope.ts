import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sandboxNotFound, snapshotNotFound, type SandboxHost } from '../sandboxes/sandbox-host.js';

/**
 * What an API key sees (service.apiKeys): the sandboxes it made, their snapshots and forks; the
 * service token (and a service without auth) sees everything. Another key's sandbox is answered
 * as one that does not exist, so ids do not say whom they belong to.
 */
export function sees(request: FastifyRequest, owner: string | undefined): boolean {
  return request.apiKey === null || owner === request.apiKey;
}

/** The key a create is made for: the sandbox belongs to it (undefined: the service token). */
export function creator(request: FastifyRequest): string | undefined {
  return request.apiKey ?? undefined;
}

/** Before a route with a sandbox id in `param` acts: not found, to a key that did not make it. */
export function guardSandboxRoutes(app: FastifyInstance, sandboxes: SandboxHost, param: string): void {
  app.addHook('preHandler', async (request) => {
    const id = (request.params as Record<string, string | undefined> | undefined)?.[param];
    if (request.apiKey === null || id === undefined) return;
    if (!sees(request, (await sandboxes.describe(id)).api_key)) throw sandboxNotFound(id);
  });
}

/** A snapshot by id or name, if the key sees it; snapshot.not_found otherwise. */
export async function visibleSnapshot(request: FastifyRequest, sandboxes: SandboxHost, idOrName: string): Promise<void> {
  if (request.apiKey === null) return;
  const [found] = await sandboxes.listSnapshots({ name: idOrName });
  if (!found || !sees(request, found.api_key)) throw snapshotNotFound(idOrName);
}
