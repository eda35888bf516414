import type { FastifyInstance } from 'fastify';
import { HealthSchema } from '../../contract/service.js';
import type { JobDesk } from '../../service/job-desk.js';
import type { WorkerProcess } from '../../service/worker-process.js';
import { routeSchema } from '../route-schema.js';

export function healthRoutes(frontDoor: JobDesk, worker: WorkerProcess, defaultKind: string, concurrency: number) {
  return async (app: FastifyInstance) => {
    app.get(
      '/health',
      { schema: { summary: 'Liveness, queue depth and running count, whether the run store takes writes, and the default backend', response: { 200: routeSchema(HealthSchema) } } },
      async () => {
        const backends = worker.knownBackends();
        const { heldJobs, ...store } = frontDoor.storeHealth();
        // Still 200 when degraded: the service is alive and serving reads; restarting it would lose what it holds.
        return {
          status: store.writable && heldJobs === 0 ? 'ok' : 'degraded',
          queue: { ...frontDoor.health(), concurrency },
          store: { ...store, held_jobs: heldJobs },
          backend: backends.find((backend) => backend.kind === defaultKind) ?? backends[0],
        };
      },
    );
  };
}
