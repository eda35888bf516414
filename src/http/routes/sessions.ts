import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import {
  SessionCreateRequestSchema,
  SessionExecRequestSchema,
  SessionExecResultSchema,
  SessionFileWrittenSchema,
  SessionListSchema,
  SessionSchema,
} from '../../contract/session.js';
import type { SessionCreateRequest, SessionExecRequest } from '../../contract/session.js';
import { sessionNotFound, type SessionHost } from '../../sessions/session-host.js';
import { creator, guardOwnedRoutes, sees } from '../api-key-scope.js';
import { acceptFileBodies, BYTES_SCHEMA, FILE_RESPONSE, OCTET_STREAM } from '../file-bodies.js';
import { JSON_BODY } from '../media-types.js';
import { namedSchema, routeSchema } from '../route-schema.js';

const SessionParams = routeSchema(Type.Object({ session_id: Type.String() }));
/** Fastify's wildcard: the OpenAPI document names it `path` (openapi.ts). */
const FileParams = routeSchema(Type.Object({ session_id: Type.String(), '*': Type.String({ description: 'the file’s path in the work dir, slashes and all' }) }));
const LIVE_ERRORS = ['session.not_found', 'session.ended', 'session.lost'] as const;
type SessionRoute = { Params: { session_id: string } };
type FileRoute = { Params: { session_id: string; '*': string } };

/**
 * Sessions (sessions/): a sandbox that lives across calls. They live in a sandbox host (the
 * worker process), never in this one: every route hands its session id to `sessions`, which
 * finds the session (in the distributed mode, through whichever front door's worker holds it).
 */
export function sessionRoutes(sessions: SessionHost, maxFileBytes: number) {
  return async (app: FastifyInstance) => {
    acceptFileBodies(app, maxFileBytes);
    guardOwnedRoutes(app, 'session_id', async (id) => (await sessions.describe(id)).api_key, sessionNotFound);

    app.post<{ Body: SessionCreateRequest }>(
      '/v1/sessions',
      {
        config: { accepts: JSON_BODY, errors: ['sessions.full', 'queue.closed', ['backend.unavailable', 503], ['backend.setup_failed', 500]] },
        schema: {
          summary: 'Start a session: a sandbox with a work dir and, for python and node, a live interpreter',
          body: namedSchema(app, SessionCreateRequestSchema),
          response: { 201: namedSchema(app, SessionSchema) },
        },
      },
      async (request, reply) => reply.code(201).send(await sessions.create(request.body, creator(request))),
    );

    app.get(
      '/v1/sessions',
      { schema: { summary: 'The sessions of this front door, live and recently ended', response: { 200: namedSchema(app, SessionListSchema) } } },
      async (request) => ({ sessions: (await sessions.list()).filter((session) => sees(request, session.api_key)) }),
    );

    app.get<SessionRoute>(
      '/v1/sessions/:session_id',
      {
        config: { errors: ['session.not_found', 'session.lost'] },
        schema: { summary: 'A session’s state', params: SessionParams, response: { 200: namedSchema(app, SessionSchema) } },
      },
      (request) => sessions.describe(request.params.session_id),
    );

    app.post<SessionRoute & { Body: SessionExecRequest }>(
      '/v1/sessions/:session_id/exec',
      {
        config: { accepts: JSON_BODY, errors: [...LIVE_ERRORS, ['policy.command_denied', 403], ['policy.shell_denied', 403]] },
        schema: {
          summary: 'Run a cell (`code`) in the session’s interpreter, or a command (`argv`) in its work dir',
          params: SessionParams,
          body: namedSchema(app, SessionExecRequestSchema),
          response: { 200: namedSchema(app, SessionExecResultSchema) },
        },
      },
      (request) => sessions.exec(request.params.session_id, request.body),
    );

    app.put<FileRoute & { Body: Buffer }>(
      '/v1/sessions/:session_id/files/*',
      {
        config: { accepts: [OCTET_STREAM], errors: [...LIVE_ERRORS, 'validation.path_escape', 'session.file_too_large', 'session.file_not_regular', 'request.too_large'] },
        // The body schema documents the bytes; a Buffer is no JSON value to validate.
        attachValidation: true,
        schema: {
          summary: 'Write a file into the session’s work dir (the body is its bytes)',
          params: FileParams,
          body: BYTES_SCHEMA,
          response: { 201: namedSchema(app, SessionFileWrittenSchema) },
        },
      },
      async (request, reply) => reply.code(201).send(await sessions.writeFile(request.params.session_id, request.params['*'], request.body ?? Buffer.alloc(0))),
    );

    app.get<FileRoute>(
      '/v1/sessions/:session_id/files/*',
      {
        config: { errors: [...LIVE_ERRORS, 'validation.path_escape', 'session.file_not_found', 'session.file_not_regular', 'session.file_too_large'] },
        schema: {
          summary: 'Read a file of the session’s work dir',
          params: FileParams,
          response: { 200: FILE_RESPONSE },
        },
      },
      async (request, reply) => reply.header('Content-Type', OCTET_STREAM).send(await sessions.readFile(request.params.session_id, request.params['*'])),
    );

    app.delete<SessionRoute>(
      '/v1/sessions/:session_id',
      {
        config: { errors: ['session.not_found', 'session.lost'] },
        schema: { summary: 'End a session: its sandbox and everything in it go', params: SessionParams, response: { 200: namedSchema(app, SessionSchema) } },
      },
      (request) => sessions.remove(request.params.session_id),
    );
  };
}
