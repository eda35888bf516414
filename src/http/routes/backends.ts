import type { FastifyInstance } from 'fastify';
import { BackendListSchema } from '../../contract/backend.js';
import type { WorkerProcess } from '../../jobs/worker-process.js';
import { namedSchema } from '../route-schema.js';

/** The sandbox backends by kind, as the worker that runs jobs probes them. */
export function backendRoutes(worker: WorkerProcess) {
  return async (app: FastifyInstance) => {
    app.get(
      '/v1/backends',
      { schema: { summary: 'Sandbox backends: kind, availability with reasons, capabilities', response: { 200: namedSchema(app, BackendListSchema) } } },
      () => worker.backends(),
    );
  };
}
