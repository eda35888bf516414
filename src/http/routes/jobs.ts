import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ArtifactSchema, JobStatusSchema, RunJobRequestSchema } from '../../contract/run-job.js';
import { ErrorBodySchema, JobAcceptedSchema, JobPageSchema, JobStateSchema, type JobStatus } from '../../contract/service.js';
import type { JobDesk } from '../../service/job-desk.js';
import { hangUpSignal } from '../hang-up.js';
import { JSON_BODY } from '../media-types.js';
import { routeSchema } from '../route-schema.js';

const MAX_WAIT_SECONDS = 300;
const JobIdParams = routeSchema(Type.Object({ job_id: Type.String() }));
const errors = { 404: routeSchema(ErrorBodySchema), 409: routeSchema(ErrorBodySchema), 422: routeSchema(ErrorBodySchema), 503: routeSchema(ErrorBodySchema) };

export function jobRoutes(service: JobDesk) {
  return async (app: FastifyInstance) => {
    app.post(
      '/v1/jobs',
      {
        config: { accepts: JSON_BODY },
        schema: { summary: 'Queue a RunJobRequest', body: routeSchema(RunJobRequestSchema), response: { 202: routeSchema(JobAcceptedSchema), ...errors } },
      },
      async (request, reply) => {
        const record = await service.submit(request.body);
        return reply.code(202).send({ job_id: record.job_id, status: 'queued' });
      },
    );

    app.get<{ Querystring: { limit?: number; cursor?: string; status?: JobStatus } }>(
      '/v1/jobs',
      {
        schema: {
          summary: 'A page of jobs, newest first',
          querystring: routeSchema(
            Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })), cursor: Type.Optional(Type.String()), status: Type.Optional(JobStatusSchema) }),
          ),
          response: { 200: routeSchema(JobPageSchema) },
        },
      },
      async (request) => service.list(request.query.limit ?? 50, request.query.cursor, request.query.status),
    );

    app.get<{ Params: { job_id: string }; Querystring: { wait?: number } }>(
      '/v1/jobs/:job_id',
      {
        schema: {
          summary: 'Current status; the full RunJobResult once terminal. ?wait=SECONDS long-polls until terminal.',
          params: JobIdParams,
          querystring: routeSchema(Type.Object({ wait: Type.Optional(Type.Number({ minimum: 0, maximum: MAX_WAIT_SECONDS })) })),
          response: { 200: routeSchema(JobStateSchema), 404: routeSchema(ErrorBodySchema) },
        },
      },
      async (request, reply) => {
        const waitSeconds = request.query.wait ?? 0;
        if (waitSeconds <= 0) return service.get(request.params.job_id);
        return service.waitForTerminal(request.params.job_id, waitSeconds * 1000, hangUpSignal(reply));
      },
    );

    app.get<{ Params: { job_id: string } }>(
      '/v1/jobs/:job_id/artifacts',
      {
        schema: {
          summary: 'Artifact metadata of a terminal job',
          params: JobIdParams,
          response: { 200: routeSchema(Type.Object({ job_id: Type.String(), artifacts: Type.Array(ArtifactSchema) })), ...errors },
        },
      },
      async (request) => ({ job_id: request.params.job_id, artifacts: await service.artifacts(request.params.job_id) }),
    );

    app.get<{ Params: { job_id: string; '*': string } }>(
      '/v1/jobs/:job_id/artifacts/*',
      { schema: { summary: 'Download one artifact by the path its result lists' } },
      async (request, reply) => {
        const { artifact, content } = await service.openArtifact(request.params.job_id, request.params['*']);
        return reply.header('Content-Type', 'application/octet-stream').header('Content-Length', String(artifact.size)).header('X-Artifact-Sha256', artifact.sha256).send(content);
      },
    );

    app.post<{ Params: { job_id: string } }>(
      '/v1/jobs/:job_id/cancel',
      { schema: { summary: 'Cancel: a queued job never runs, a running one is killed (whole tree)', params: JobIdParams, response: { 404: routeSchema(ErrorBodySchema) } } },
      async (request) => {
        const record = await service.cancel(request.params.job_id);
        return { job_id: record.job_id, status: record.status };
      },
    );
  };
}
