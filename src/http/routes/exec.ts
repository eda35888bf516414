import type { FastifyInstance } from 'fastify';
import { SnippetRequestSchema, SnippetResponseSchema } from '../../contract/snippet.js';
import { executeSnippet } from '../../runner/snippet.js';
import type { RunnerRuntime } from '../../runner/runtime.js';
import { Semaphore } from '../../runner/semaphore.js';
import { routeSchema } from '../route-schema.js';

/**
 * The snippet contract, synchronously. An invalid snippet is answered as the snippet documents
 * say (200, exit_code 2, the field named), so the body schema here documents, it does not gate.
 */
export function execRoutes(runtime: RunnerRuntime, slots: Semaphore) {
  return async (app: FastifyInstance) => {
    app.post(
      '/v1/exec',
      {
        attachValidation: true,
        schema: { summary: 'Run one snippet and answer with its response', body: routeSchema(SnippetRequestSchema), response: { 200: routeSchema(SnippetResponseSchema) } },
      },
      async (request, reply) => {
        const aborter = new AbortController();
        // The client hung up before its answer: stop the job rather than finish it for no one.
        reply.raw.once('close', () => !reply.raw.writableFinished && aborter.abort());
        return slots.run(() => executeSnippet(request.body, { runtime, signal: aborter.signal }));
      },
    );
  };
}
