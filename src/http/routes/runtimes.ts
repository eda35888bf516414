import type { FastifyInstance } from 'fastify';
import { RuntimeListSchema } from '../../contract/runtimes.js';
import type { WorkerProcess } from '../../jobs/worker-process.js';
import { namedSchema } from '../route-schema.js';

export function runtimeRoutes(worker: WorkerProcess) {
  return async (app: FastifyInstance) => {
    app.get(
      '/v1/runtimes',
      { schema: { summary: 'The languages snippets can use here, with their versions and aliases', response: { 200: namedSchema(app, RuntimeListSchema) } } },
      () => worker.runtimes(),
    );
  };
}
