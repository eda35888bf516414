import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { E2bConnectSchema, E2bPauseSchema, E2bSandboxSchema } from '../../contract/e2b.js';
import type { SandboxHost } from '../../sandboxes/sandbox-host.js';
import { namedSchema } from '../route-schema.js';
import { e2bError } from './e2b-errors.js';
import { E2B_ROUTE, known, SandboxParams, type E2bErrors, type SandboxRoute } from './e2b-route.js';
import { created } from './e2b-shapes.js';

/**
 * E2B's pause and resume, registered inside e2bRoutes (its error handler answers in E2B's
 * dialect): `Sandbox.connect`, which resumes a paused sandbox (E2B's resume now), `pause`, and
 * the older resume route.
 */
export function e2bPauseRoutes(app: FastifyInstance, sandboxes: SandboxHost, errors: E2bErrors): void {
  for (const url of ['/sandboxes/:sandboxID/connect', '/v2/sandboxes/:sandboxID/connect']) {
    app.post<SandboxRoute & { Body: { timeout?: number } | undefined }>(
      url,
      {
        config: E2B_ROUTE,
        schema: {
          summary: 'E2B: connect to a sandbox, resuming it if paused (201); its timeout is moved out to `timeout` seconds from now, never in',
          tags: ['e2b'],
          params: SandboxParams,
          body: namedSchema(app, E2bConnectSchema),
          response: { 200: namedSchema(app, E2bSandboxSchema), 201: namedSchema(app, E2bSandboxSchema), ...errors },
        },
      },
      async (request, reply) => {
        const { id } = await known(sandboxes, request.params.sandboxID);
        const { sandbox, resumed } = await sandboxes.resume(id, request.body?.timeout || undefined);
        return reply.code(resumed ? 201 : 200).send(created(sandbox));
      },
    );
  }

  app.post<SandboxRoute & { Body: { memory?: boolean } | undefined }>(
    '/sandboxes/:sandboxID/pause',
    {
      config: E2B_ROUTE,
      schema: {
        summary: 'E2B: pause a sandbox (its files kept, its memory too where the backend can); 409 when it is paused already',
        tags: ['e2b'],
        params: SandboxParams,
        body: namedSchema(app, E2bPauseSchema),
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (request, reply) => {
      const { id, state } = await known(sandboxes, request.params.sandboxID);
      if (state === 'paused') return e2bError(reply, 409, `sandbox ${id} is already paused`);
      const memory = request.body?.memory;
      await sandboxes.pause(id, memory === undefined ? {} : { keep_memory: memory });
      return reply.code(204).send();
    },
  );

  app.post<SandboxRoute & { Body: { timeout?: number } | undefined }>(
    '/sandboxes/:sandboxID/resume',
    {
      config: E2B_ROUTE,
      schema: {
        summary: 'E2B (deprecated there for connect): resume a paused sandbox; 409 when it is running',
        tags: ['e2b'],
        params: SandboxParams,
        body: namedSchema(app, E2bConnectSchema),
        response: { 201: namedSchema(app, E2bSandboxSchema), ...errors },
      },
    },
    async (request, reply) => {
      const { id, state } = await known(sandboxes, request.params.sandboxID);
      if (state !== 'paused') return e2bError(reply, 409, `sandbox ${id} is running, not paused`);
      const { sandbox } = await sandboxes.resume(id, request.body?.timeout || undefined);
      return reply.code(201).send(created(sandbox));
    },
  );
}
