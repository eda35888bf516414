import type { FastifyInstance } from 'fastify';
import { HealthSchema } from '../../contract/service.js';
import type { JobDesk } from '../../jobs/job-desk.js';
import type { WorkerProcess } from '../../jobs/worker-process.js';
import type { Semaphore } from '../../util/semaphore.js';
import { namedSchema } from '../route-schema.js';

/** `synchronous`: the slots snippets and tasks share, whose load the queue's numbers do not show. */
export function healthRoutes(frontDoor: JobDesk, worker: WorkerProcess, defaultKind: string, concurrency: number, synchronous: Semaphore) {
  return async (app: FastifyInstance) => {
    app.get(
      '/health',
      {
        schema: {
          summary: 'Liveness, queue depth and running count, snippets and tasks in flight, whether the run store takes writes, and the default backend',
          response: { 200: namedSchema(app, HealthSchema) },
        },
      },
      async () => {
        const backends = worker.knownBackends();
        const { heldJobs, ...store } = frontDoor.storeHealth();
        // Still 200 when degraded: the service is alive and serving reads; restarting it would lose what it holds.
        return {
          status: store.writable && heldJobs === 0 ? 'ok' : 'degraded',
          queue: { ...frontDoor.health(), concurrency },
          exec: { running: synchronous.running, waiting: synchronous.queued, concurrency: synchronous.capacity },
          store: { ...store, held_jobs: heldJobs },
          backend: backends.find((backend) => backend.kind === defaultKind) ?? backends[0],
          preparing: backends.filter((backend) => backend.state === 'preparing').map((backend) => backend.kind),
        };
      },
    );
  };
}
