import type { FastifyInstance } from 'fastify';
import { E2bForkRequestSchema, E2bForkResultSchema, type E2bForkRequest, type E2bForkResult } from '../../contract/e2b.js';
import type { SandboxHost } from '../../sandboxes/sandbox-host.js';
import { namedList, namedSchema } from '../route-schema.js';
import { statusOfCode } from './e2b-errors.js';
import { E2B_ROUTE, running, SandboxParams, type E2bErrors, type SandboxRoute } from './e2b-route.js';
import { created } from './e2b-shapes.js';

/** A fork's life when the request says none: E2B's default (spec/openapi.yml SandboxForkRequest). */
const FORK_TIMEOUT_SECONDS = 15;

/** E2B's fork (spec/openapi.yml `/sandboxes/{sandboxID}/fork`), registered inside e2bRoutes (its error handler answers in E2B's dialect). */
export function e2bForkRoutes(app: FastifyInstance, sandboxes: SandboxHost, errors: E2bErrors): void {
  app.post<SandboxRoute & { Body: E2bForkRequest | undefined }>(
    '/sandboxes/:sandboxID/fork',
    {
      config: E2B_ROUTE,
      schema: {
        summary: 'E2B: copies of a running sandbox, each its own sandbox; one result each (a sandbox or an error)',
        tags: ['e2b'],
        params: SandboxParams,
        body: namedSchema(app, E2bForkRequestSchema),
        response: { 201: namedList(app, E2bForkResultSchema), ...errors },
      },
    },
    async (request, reply) => {
      const { id } = await running(sandboxes, request.params.sandboxID);
      const { timeout, count } = request.body ?? {};
      const { forks } = await sandboxes.fork(id, { timeout_seconds: timeout || FORK_TIMEOUT_SECONDS, ...(count === undefined ? {} : { count }) });
      const results: E2bForkResult[] = forks.map((fork) =>
        fork.sandbox ? { sandbox: created(fork.sandbox) } : { error: { code: statusOfCode(fork.error!.code), message: fork.error!.message } },
      );
      return reply.code(201).send(results);
    },
  );
}
