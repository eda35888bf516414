import type { FastifyInstance } from 'fastify';
import { HealthSchema } from '../../contract/service.js';
import type { FrontDoor } from '../../service/front-door.js';
import type { WorkerProcess } from '../../service/worker-process.js';
import { routeSchema } from '../route-schema.js';

export function healthRoutes(frontDoor: FrontDoor, worker: WorkerProcess, defaultKind: string, concurrency: number) {
  return async (app: FastifyInstance) => {
    app.get('/health', { schema: { summary: 'Liveness, queue depth and running count, and the default backend', response: { 200: routeSchema(HealthSchema) } } }, async () => {
      const backends = worker.knownBackends();
      return { status: 'ok', queue: { ...frontDoor.health(), concurrency }, backend: backends.find((backend) => backend.kind === defaultKind) ?? backends[0] };
    });
  };
}
