import type { FastifyInstance } from 'fastify';
import { TaskRequestSchema, TaskResponseSchema } from '../../contract/task.js';
import type { WorkerProcess } from '../../jobs/worker-process.js';
import type { Semaphore } from '../../util/semaphore.js';
import { hangUpSignal } from '../hang-up.js';
import { JSON_BODY } from '../media-types.js';
import { namedSchema } from '../route-schema.js';

/**
 * Code tasks, synchronously. A task's own failure (its exception, a timeout) is a 200 with an
 * error message, as the pipe protocol defines; only a request that does not validate is a 422.
 */
export function taskRoutes(worker: WorkerProcess, slots: Semaphore) {
  return async (app: FastifyInstance) => {
    app.post(
      '/v1/tasks',
      {
        config: { accepts: JSON_BODY },
        schema: {
          summary: 'Run a code task: items in, items out, captured prints',
          body: namedSchema(app, TaskRequestSchema),
          response: { 200: namedSchema(app, TaskResponseSchema) },
        },
      },
      async (request, reply) => slots.run(() => worker.task(request.body, hangUpSignal(reply))),
    );
  };
}
