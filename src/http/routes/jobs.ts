import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { JobStatusSchema, RunJobRequestSchema, type RunJobRequest } from '../../contract/run-job.js';
import { ArtifactListSchema, JobAcceptedSchema, JobCancelledSchema, JobPageSchema, JobStateSchema, type JobStatus } from '../../contract/service.js';
import type { JobDesk } from '../../jobs/job-desk.js';
import { hangUpSignal } from '../hang-up.js';
import { JSON_BODY } from '../media-types.js';
import { namedSchema, routeSchema } from '../route-schema.js';
import { UPLOAD_FORM, acceptWorkspaceUploads, requestFromUpload } from '../workspace-upload.js';
import { creator, guardJobRoutes } from '../api-key-scope.js';

const MAX_WAIT_SECONDS = 300;
const JobIdParams = routeSchema(Type.Object({ job_id: Type.String() }));
/** Fastify's wildcard: the OpenAPI document names it `path` (openapi.ts). */
const ArtifactParams = routeSchema(Type.Object({ job_id: Type.String(), '*': Type.String({ description: 'the path the result lists, slashes and all' }) }));
/** A desk that cannot reach its store (the cluster's database) refuses reads too. */
const READ_ERRORS = ['job.not_found', 'store.unavailable'] as const;

export function jobRoutes(service: JobDesk) {
  return async (app: FastifyInstance) => {
    await acceptWorkspaceUploads(app);
    guardJobRoutes(app, service);
    app.post(
      '/v1/jobs',
      {
        config: {
          accepts: [...JSON_BODY, 'multipart/form-data'],
          form: UPLOAD_FORM,
          // backend.unavailable: no live worker offers the kind (the cluster's admission).
          errors: ['validation.path_escape', 'limits.workspace_too_large', 'job.duplicate', 'queue.full', 'queue.closed', 'store.unavailable', ['backend.unavailable', 503]],
        },
        schema: {
          summary: 'Queue a RunJobRequest',
          description:
            'JSON, or multipart/form-data with a `request` part (the RunJobRequest, its workspace omitted or an archive without data) and a `workspace` file part (a tar or tar.gz).',
          body: namedSchema(app, RunJobRequestSchema),
          response: { 202: namedSchema(app, JobAcceptedSchema) },
        },
        // An upload becomes the JSON request before validation: one shape from here on.
        preValidation: async (request) => {
          if (request.isMultipart()) request.body = await requestFromUpload(request);
        },
      },
      async (request, reply) => {
        // A job without a trace id of its caller's is traced by its request's id: the worker's
        // lines about it (`job finished`) then carry the id the HTTP request was logged with.
        const body = request.body as RunJobRequest;
        const record = await service.submit(body.trace?.trace_id ? body : { ...body, trace: { ...body.trace, trace_id: request.id } }, creator(request));
        return reply.code(202).send({ job_id: record.job_id, status: 'queued' });
      },
    );

    app.get<{ Querystring: { limit?: number; cursor?: string; status?: JobStatus } }>(
      '/v1/jobs',
      {
        config: { errors: ['validation.invalid_cursor', 'store.unavailable'] },
        schema: {
          summary: 'A page of jobs, newest first',
          querystring: routeSchema(
            Type.Object({
              limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
              cursor: Type.Optional(Type.String({ description: 'next_cursor of the previous page' })),
              status: Type.Optional(JobStatusSchema),
            }),
          ),
          response: { 200: namedSchema(app, JobPageSchema) },
        },
      },
      async (request) => service.list(request.query.limit ?? 50, request.query.cursor, request.query.status, creator(request)),
    );

    app.get<{ Params: { job_id: string }; Querystring: { wait?: number } }>(
      '/v1/jobs/:job_id',
      {
        config: { errors: READ_ERRORS },
        schema: {
          summary: 'Current status; the full RunJobResult once terminal. ?wait=SECONDS long-polls until terminal.',
          params: JobIdParams,
          querystring: routeSchema(Type.Object({ wait: Type.Optional(Type.Number({ minimum: 0, maximum: MAX_WAIT_SECONDS })) })),
          response: { 200: namedSchema(app, JobStateSchema) },
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
        config: { errors: [...READ_ERRORS, 'job.not_terminal'] },
        schema: {
          summary: 'Artifact metadata of a terminal job',
          params: JobIdParams,
          response: { 200: namedSchema(app, ArtifactListSchema) },
        },
      },
      async (request) => ({ job_id: request.params.job_id, artifacts: await service.artifacts(request.params.job_id) }),
    );

    app.get<{ Params: { job_id: string; '*': string } }>(
      '/v1/jobs/:job_id/artifacts/*',
      {
        config: { errors: [...READ_ERRORS, 'job.not_terminal'] },
        schema: {
          summary: 'Download one artifact by the path its result lists',
          params: ArtifactParams,
          response: {
            200: {
              description: "The artifact's bytes",
              headers: { 'X-Artifact-Sha256': { type: 'string', description: 'sha256 of the bytes, as the result lists it' } },
              content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } },
            },
          },
        },
      },
      async (request, reply) => {
        const { artifact, content } = await service.openArtifact(request.params.job_id, request.params['*']);
        return reply.header('Content-Type', 'application/octet-stream').header('Content-Length', String(artifact.size)).header('X-Artifact-Sha256', artifact.sha256).send(content);
      },
    );

    app.post<{ Params: { job_id: string } }>(
      '/v1/jobs/:job_id/cancel',
      {
        config: { errors: READ_ERRORS },
        schema: {
          summary: 'Cancel: a queued job never runs, a running one is killed (whole tree)',
          params: JobIdParams,
          response: { 200: namedSchema(app, JobCancelledSchema) },
        },
      },
      async (request) => {
        const record = await service.cancel(request.params.job_id);
        return { job_id: record.job_id, status: record.status };
      },
    );
  };
}
