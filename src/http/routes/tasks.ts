import type { FastifyInstance } from 'fastify';
import { TaskRequestSchema, TaskResponseSchema } from '../../tasks/contract.js';
import { runTask } from '../../tasks/run-task.js';
import type { RunnerRuntime } from '../../runner/runtime.js';
import { Semaphore } from '../../runner/semaphore.js';
import { routeSchema } from '../route-schema.js';

/**
 * Code tasks, synchronously. A task's own failure (its exception, a timeout) is a 200 with an
 * error message, as the pipe protocol defines; only a request that does not validate is a 422.
 */
export function taskRoutes(runtime: RunnerRuntime, slots: Semaphore) {
  return async (app: FastifyInstance) => {
    app.post(
      '/v1/tasks',
      { schema: { summary: 'Run a code task: items in, items out, captured prints', body: routeSchema(TaskRequestSchema), response: { 200: routeSchema(TaskResponseSchema) } } },
      async (request, reply) => {
        const aborter = new AbortController();
        reply.raw.once('close', () => !reply.raw.writableFinished && aborter.abort());
        return slots.run(() => runTask(request.body, { runtime, signal: aborter.signal }));
      },
    );
  };
}
