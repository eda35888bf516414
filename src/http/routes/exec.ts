import type { FastifyInstance } from 'fastify';
import { SnippetRequestSchema, SnippetResponseSchema } from '../../contract/snippet.js';
import type { WorkerProcess } from '../../jobs/worker-process.js';
import type { Semaphore } from '../../util/semaphore.js';
import { hangUpSignal } from '../hang-up.js';
import { JSON_BODY } from '../media-types.js';
import { namedSchema } from '../route-schema.js';

/**
 * The snippet contract, synchronously. An invalid snippet is answered as the snippet documents
 * say (200, exit_code 2, the field named), so the body schema here documents, it does not gate.
 */
export function execRoutes(worker: WorkerProcess, slots: Semaphore) {
  return async (app: FastifyInstance) => {
    app.post(
      '/v1/exec',
      {
        attachValidation: true,
        config: { accepts: JSON_BODY },
        schema: {
          summary: 'Run one snippet and answer with its response',
          body: namedSchema(app, SnippetRequestSchema),
          response: { 200: namedSchema(app, SnippetResponseSchema) },
        },
      },
      async (request, reply) => slots.run(() => worker.exec(request.body, hangUpSignal(reply))),
    );
  };
}
