import type { FastifyInstance } from 'fastify';
import type { JobDesk } from '../../jobs/job-desk.js';
import type { WorkerProcess } from '../../jobs/worker-process.js';
import { gaugeOf, httpDuration, httpRequests, mergedMetrics } from '../../util/metrics.js';
import { serviceTokenOnly } from '../api-key-scope.js';

/**
 * Counts every request once answered, by its route's pattern (not its URL: ids would make a
 * series each). On the app itself, not in a route plugin, so that it sees every route.
 */
export function countRequests(app: FastifyInstance): void {
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });
}

/**
 * `GET /metrics` in Prometheus' text format: this front door's metrics (HTTP requests, its queue
 * and store) and its worker process's (jobs, sandboxes, warm pools), each labelled with its
 * `process`. The service token's only: its numbers count every API key's objects together, so a
 * key is answered 403 auth.forbidden.
 */
export function metricsRoutes(frontDoor: JobDesk, worker: WorkerProcess) {
  return async (app: FastifyInstance) => {
    serviceTokenOnly(app);
    gaugeOf('agent_runner_queue_jobs', 'Jobs in the queue now: waiting (depth), running, and its capacity.', ['kind'], () => {
      const { depth, running, capacity } = frontDoor.health();
      return [
        [{ kind: 'waiting' }, depth],
        [{ kind: 'running' }, running],
        [{ kind: 'capacity' }, capacity],
      ];
    });
    gaugeOf('agent_runner_store_writable', 'Whether the run store takes writes (1) or refuses them (0: a full disk, a lost database...).', [], () => [
      [{}, frontDoor.storeHealth().writable ? 1 : 0],
    ]);
    gaugeOf('agent_runner_store_held_jobs', 'Jobs whose status or result is held in memory until the store takes it.', [], () => [[{}, frontDoor.storeHealth().heldJobs]]);

    app.get(
      '/metrics',
      {
        config: { errors: ['auth.forbidden'] },
        schema: {
          summary: 'Prometheus metrics of this front door and its worker process',
          response: { 200: { description: "Prometheus' text exposition format", content: { 'text/plain': { schema: { type: 'string' } } } } },
        },
      },
      async (_request, reply) => {
        const { text, contentType } = await mergedMetrics([await worker.metrics()]);
        return reply.type(contentType).send(text);
      },
    );
  };
}
