import { Type } from '@sinclair/typebox';
import { isForwarded } from '../forwarded.js';
import type { FastifyInstance } from 'fastify';
import {
  SandboxCreateRequestSchema,
  SandboxExecRequestSchema,
  SandboxExecResultSchema,
  SandboxFileWrittenSchema,
  SandboxForkRequestSchema,
  SandboxForkResultSchema,
  SandboxListSchema,
  SandboxPauseRequestSchema,
  SandboxResumeRequestSchema,
  SandboxRunCodeRequestSchema,
  SandboxRunCodeResultSchema,
  SandboxSchema,
  SandboxTimeoutRequestSchema,
  SnapshotCreateRequestSchema,
  SnapshotListSchema,
  SnapshotSchema,
} from '../../contract/sandbox.js';
import type {
  SandboxCreateRequest,
  SandboxExecRequest,
  SandboxForkRequest,
  SandboxPauseRequest,
  SandboxResumeRequest,
  SandboxRunCodeRequest,
  SandboxTimeoutRequest,
  SnapshotCreateRequest,
} from '../../contract/sandbox.js';
import type { SandboxHost } from '../../sandboxes/sandbox-host.js';
import { acceptFileBodies, BYTES_SCHEMA, FILE_RESPONSE, OCTET_STREAM } from '../file-bodies.js';
import { JSON_BODY } from '../media-types.js';
import { namedSchema, routeSchema } from '../route-schema.js';
import { creator, guardSandboxRoutes, sees } from '../api-key-scope.js';

const SandboxParams = routeSchema(Type.Object({ sandbox_id: Type.String() }));
/** Fastify's wildcard: the OpenAPI document names it `path` (openapi.ts). */
const FileParams = routeSchema(
  Type.Object({ sandbox_id: Type.String(), '*': Type.String({ description: 'the file’s path in the sandbox, relative to /home/user (a leading / is kept: absolute)' }) }),
);
const FOUND_ERRORS = ['sandbox.not_found', 'sandbox.lost'] as const;
const LIVE_ERRORS = [...FOUND_ERRORS, 'sandbox.ended', 'sandbox.paused'] as const;
/** What pausing, resuming, forking and snapshotting may answer beside a live sandbox's errors. */
const KEEP_ERRORS = [...LIVE_ERRORS, 'sandbox.busy', 'sandbox.pause_failed', 'sandboxes.full', ['backend.unavailable', 503]] as const;
const SnapshotParams = routeSchema(Type.Object({ snapshot: Type.String({ description: 'its id or name' }) }));
const SnapshotQuery = routeSchema(Type.Object({ sandbox_id: Type.Optional(Type.String()), name: Type.Optional(Type.String()) }, { additionalProperties: false }));
type SandboxRoute = { Params: { sandbox_id: string } };
type FileRoute = { Params: { sandbox_id: string; '*': string } };

/**
 * Long-lived sandboxes (sandboxes/) in our own contract, beside E2B's view of the same ones
 * (routes/e2b.ts). They live in the sandbox host (the worker process): every route hands the
 * sandbox id to `sandboxes`.
 */
export function sandboxRoutes(sandboxes: SandboxHost) {
  return async (app: FastifyInstance) => {
    acceptFileBodies(app, sandboxes.maxFileBytes());
    guardSandboxRoutes(app, sandboxes, 'sandbox_id');

    app.post<{ Body: SandboxCreateRequest }>(
      '/v1/sandboxes',
      {
        config: {
          accepts: JSON_BODY,
          errors: ['sandboxes.full', 'sandboxes.key_full', 'queue.closed', 'template.not_found', 'sandbox.lost', ['backend.unavailable', 503], ['backend.setup_failed', 500]],
        },
        schema: {
          summary: 'Start a sandbox: it runs until it is killed or its timeout passes, with processes and files served by an agent inside it',
          body: namedSchema(app, SandboxCreateRequestSchema),
          response: { 201: namedSchema(app, SandboxSchema) },
        },
      },
      async (request, reply) => reply.code(201).send(await sandboxes.create(request.body, creator(request))),
    );

    app.get(
      '/v1/sandboxes',
      {
        config: { errors: ['sandbox.lost'] },
        schema: { summary: 'The sandboxes, running and recently ended (of every front door, in the distributed mode)', response: { 200: namedSchema(app, SandboxListSchema) } },
      },
      async (request) => ({ sandboxes: (await sandboxes.list(isForwarded(request) ? 'here' : 'everywhere')).filter((sandbox) => sees(request, sandbox.api_key)) }),
    );

    app.get<SandboxRoute>(
      '/v1/sandboxes/:sandbox_id',
      { config: { errors: [...FOUND_ERRORS] }, schema: { summary: 'A sandbox’s state', params: SandboxParams, response: { 200: namedSchema(app, SandboxSchema) } } },
      (request) => sandboxes.describe(request.params.sandbox_id),
    );

    app.delete<SandboxRoute>(
      '/v1/sandboxes/:sandbox_id',
      {
        config: { errors: [...FOUND_ERRORS] },
        schema: { summary: 'Kill a sandbox: its processes and files go', params: SandboxParams, response: { 200: namedSchema(app, SandboxSchema) } },
      },
      (request) => sandboxes.kill(request.params.sandbox_id),
    );

    app.post<SandboxRoute & { Body: SandboxTimeoutRequest }>(
      '/v1/sandboxes/:sandbox_id/timeout',
      {
        config: { accepts: JSON_BODY, errors: [...LIVE_ERRORS] },
        schema: {
          summary: 'Kill the sandbox this many seconds from now (sooner or later than before)',
          params: SandboxParams,
          body: namedSchema(app, SandboxTimeoutRequestSchema),
          response: { 200: namedSchema(app, SandboxSchema) },
        },
      },
      (request) => sandboxes.setTimeout(request.params.sandbox_id, request.body.timeout_seconds),
    );

    app.post<SandboxRoute & { Body: SandboxPauseRequest | undefined }>(
      '/v1/sandboxes/:sandbox_id/pause',
      {
        config: { accepts: JSON_BODY, errors: [...KEEP_ERRORS, 'sandbox.pause_unsupported', 'sandboxes.key_paused_full', 'sandboxes.key_kept_bytes_full'] },
        schema: {
          summary: 'Pause a sandbox: its state is kept under the state dir (its files; its memory where the backend can) and it holds nothing on the host until resumed',
          params: SandboxParams,
          body: namedSchema(app, SandboxPauseRequestSchema),
          response: { 200: namedSchema(app, SandboxSchema) },
        },
      },
      (request) => sandboxes.pause(request.params.sandbox_id, request.body ?? {}),
    );

    app.post<SandboxRoute & { Body: SandboxResumeRequest | undefined }>(
      '/v1/sandboxes/:sandbox_id/resume',
      {
        config: { accepts: JSON_BODY, errors: [...KEEP_ERRORS] },
        schema: {
          summary: 'Resume a paused sandbox under its id and token, with what its pause kept (a running one is answered as it is)',
          params: SandboxParams,
          body: namedSchema(app, SandboxResumeRequestSchema),
          response: { 200: namedSchema(app, SandboxSchema) },
        },
      },
      async (request) => (await sandboxes.resume(request.params.sandbox_id, request.body?.timeout_seconds)).sandbox,
    );

    app.post<SandboxRoute & { Body: SandboxForkRequest | undefined }>(
      '/v1/sandboxes/:sandbox_id/fork',
      {
        config: { accepts: JSON_BODY, errors: [...KEEP_ERRORS] },
        schema: {
          summary: 'Copies of a running sandbox, each its own sandbox with the parent’s state; the parent keeps running',
          params: SandboxParams,
          body: namedSchema(app, SandboxForkRequestSchema),
          response: { 201: namedSchema(app, SandboxForkResultSchema) },
        },
      },
      async (request, reply) => reply.code(201).send(await sandboxes.fork(request.params.sandbox_id, request.body ?? {})),
    );

    app.post<SandboxRoute & { Body: SnapshotCreateRequest | undefined }>(
      '/v1/sandboxes/:sandbox_id/snapshots',
      {
        config: { accepts: JSON_BODY, errors: [...KEEP_ERRORS, 'sandboxes.key_snapshots_full', 'sandboxes.key_kept_bytes_full'] },
        schema: {
          summary: 'Keep a running sandbox’s state as a snapshot: a template (by id or name) new sandboxes start from',
          params: SandboxParams,
          body: namedSchema(app, SnapshotCreateRequestSchema),
          response: { 201: namedSchema(app, SnapshotSchema) },
        },
      },
      async (request, reply) => reply.code(201).send(await sandboxes.snapshot(request.params.sandbox_id, request.body ?? {})),
    );

    app.get<{ Querystring: { sandbox_id?: string; name?: string } }>(
      '/v1/snapshots',
      {
        config: { errors: ['sandbox.lost'] },
        schema: {
          summary: 'The snapshots this server keeps (of this front door’s worker, in the distributed mode)',
          querystring: SnapshotQuery,
          response: { 200: namedSchema(app, SnapshotListSchema) },
        },
      },
      async (request) => ({ snapshots: (await sandboxes.listSnapshots(request.query)).filter((snapshot) => sees(request, snapshot.api_key)) }),
    );

    app.delete<{ Params: { snapshot: string } }>(
      '/v1/snapshots/:snapshot',
      {
        config: { errors: ['snapshot.not_found', 'sandbox.lost'] },
        schema: { summary: 'Delete a snapshot (sandboxes made from it are not touched)', params: SnapshotParams, response: { 200: namedSchema(app, SnapshotSchema) } },
      },
      (request) => sandboxes.deleteSnapshot(request.params.snapshot, creator(request)),
    );

    app.post<SandboxRoute & { Body: SandboxExecRequest }>(
      '/v1/sandboxes/:sandbox_id/exec',
      {
        config: { accepts: JSON_BODY, errors: [...LIVE_ERRORS] },
        schema: {
          summary: 'Run a command (`argv`, or `cmd` through bash) to its end in the sandbox',
          params: SandboxParams,
          body: namedSchema(app, SandboxExecRequestSchema),
          response: { 200: namedSchema(app, SandboxExecResultSchema) },
        },
      },
      (request) => sandboxes.exec(request.params.sandbox_id, request.body),
    );

    app.post<SandboxRoute & { Body: SandboxRunCodeRequest }>(
      '/v1/sandboxes/:sandbox_id/run_code',
      {
        config: { accepts: JSON_BODY, errors: [...LIVE_ERRORS, 'sandbox.context_not_found', 'sandbox.contexts_full', 'sandbox.interpreter_failed'] },
        schema: {
          summary: 'Run a cell in the sandbox’s code interpreter (python, state kept) to its end: output, results (html, png, charts), error',
          params: SandboxParams,
          body: namedSchema(app, SandboxRunCodeRequestSchema),
          response: { 200: namedSchema(app, SandboxRunCodeResultSchema) },
        },
      },
      (request) => sandboxes.runCode(request.params.sandbox_id, request.body),
    );

    app.put<FileRoute & { Body: Buffer }>(
      '/v1/sandboxes/:sandbox_id/files/*',
      {
        config: {
          accepts: [OCTET_STREAM],
          errors: [...LIVE_ERRORS, 'sandbox.file_too_large', 'sandbox.file_not_regular', 'sandbox.file_denied', 'sandbox.file_failed', 'request.too_large'],
        },
        // The body schema documents the bytes; a Buffer is no JSON value to validate.
        attachValidation: true,
        schema: {
          summary: 'Write a file into the sandbox, its parents made (the body is its bytes)',
          params: FileParams,
          body: BYTES_SCHEMA,
          response: { 201: namedSchema(app, SandboxFileWrittenSchema) },
        },
      },
      async (request, reply) => reply.code(201).send(await sandboxes.writeFile(request.params.sandbox_id, request.params['*'], request.body ?? Buffer.alloc(0))),
    );

    app.get<FileRoute>(
      '/v1/sandboxes/:sandbox_id/files/*',
      {
        config: { errors: [...LIVE_ERRORS, 'sandbox.file_not_found', 'sandbox.file_not_regular', 'sandbox.file_too_large', 'sandbox.file_denied', 'sandbox.file_failed'] },
        schema: {
          summary: 'Read a file of the sandbox',
          params: FileParams,
          response: { 200: FILE_RESPONSE },
        },
      },
      async (request, reply) => reply.header('Content-Type', OCTET_STREAM).send(await sandboxes.readFile(request.params.sandbox_id, request.params['*'])),
    );
  };
}
