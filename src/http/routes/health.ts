import type { FastifyInstance } from 'fastify';
import { HealthSchema } from '../../contract/service.js';
import type { JobService } from '../../service/job-service.js';
import type { SandboxBackend } from '../../sandbox/types.js';
import { routeSchema } from '../route-schema.js';

export function healthRoutes(service: JobService, backend: SandboxBackend) {
  return async (app: FastifyInstance) => {
    app.get('/health', { schema: { summary: 'Liveness, queue depth and running count', response: { 200: routeSchema(HealthSchema) } } }, async () => {
      const status = await backend.status();
      return { status: 'ok', queue: service.health(), backend: { name: status.name, available: status.available, resourceControl: status.resourceControl, notes: status.notes } };
    });
  };
}
