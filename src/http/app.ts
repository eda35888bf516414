import swagger from '@fastify/swagger';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Logger } from 'pino';
import type { JobDesk } from '../jobs/job-desk.js';
import type { WorkerProcess } from '../jobs/worker-process.js';
import type { SessionHost } from '../sessions/session-host.js';
import type { SandboxHost } from '../sandboxes/sandbox-host.js';
import type { ServiceSettings } from '../config/schema.js';
import { installBearerAuth } from './auth.js';
import { answerClientError } from './client-errors.js';
import { limitConnections } from '../util/connection-limits.js';
import { clientServer } from '../util/client-server.js';
import { enforceFirstHeaderDeadline } from './header-deadline.js';
import { enforceRequestDeadline } from './request-deadline.js';
import { closeOnUnreadBody } from './unread-body.js';
import { handOffSandboxConnection, installEnvdProxy, installSandboxForwarding, isSandboxTraffic, takeBack, takeSandboxTraffic } from './envd-proxy.js';
import { routeConnections } from './connection-handoff.js';
import { installErrorHandler } from './errors.js';
import { installMediaTypeGate } from './media-types.js';
import { boundJsonBodies } from './json-bodies.js';
import { openapiOptions } from './openapi.js';
import { routeValidator } from './route-schema.js';

import { backendRoutes } from './routes/backends.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { e2bRoutes } from './routes/e2b.js';
import { eventRoutes } from './routes/events.js';
import { execRoutes } from './routes/exec.js';
import { healthRoutes } from './routes/health.js';
import { pistonRoutes } from './routes/piston.js';
import { runtimeRoutes } from './routes/runtimes.js';
import { templateRoutes, type ServedTemplates } from './routes/templates.js';
import { e2bTemplateRoutes } from './routes/e2b-templates.js';
import { sandboxRoutes } from './routes/sandboxes.js';
import { volumeRoutes } from './routes/volumes.js';
import { isSyncIn, syncRoutes } from './routes/sync.js';
import { jobRoutes } from './routes/jobs.js';
import { sessionRoutes } from './routes/sessions.js';
import { taskRoutes } from './routes/tasks.js';
import { countRequests, metricsRoutes } from './routes/metrics.js';
import { Semaphore } from '../util/semaphore.js';
import { OneLinePerRequest } from './request-log.js';

/** Fastify types a validator factory as @fastify/ajv-compiler's; any function to a compiler works. */
type ValidatorFactory = NonNullable<NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator']>;

export interface AppOptions {
  frontDoor: JobDesk;
  worker: WorkerProcess;
  /** Where sessions live (a sandbox host, never this process): the routes reach them by id. */
  sessions: SessionHost;
  /** Where long-lived sandboxes live (the worker process); E2B's control plane reaches them by id. */
  sandboxes: SandboxHost;
  /** The templates a sandbox may start from, snapshots aside: the host's (sandboxes/templates.ts), and those made of images. */
  templates: ServedTemplates;
  /** The largest file a session takes or gives. */
  sessionFileBytes: number;
  /** The backend kind jobs run on when they name none, for /health. */
  defaultBackend: string;
  /** Required on every route but /health; null: no authentication (`--no-auth`, loopback only). */
  token: string | null;
  /** Keys of other clients beside the token (service.apiKeys): each sees only its own sandboxes. */
  apiKeys?: ServiceSettings['apiKeys'];
  bodyLimitBytes: number;
  /** Most values (array items and object members) a JSON body may hold (service.bodyLimitValues). */
  bodyLimitValues: number;
  /** Deadlines and connection counts that keep a slow or greedy client from holding the service. */
  clients: ServiceSettings['clients'];
  execConcurrency: number;
  logger: Logger;
}

/** What a caller's X-Request-Id may be to be taken as ours: nothing a log line could be forged with. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The HTTP face: one plugin per route group, schemas from contract/, errors from the code table. */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const { clients } = options;
  const takeSandbox = takeSandboxTraffic(options.sandboxes);
  const app = Fastify({
    bodyLimit: options.bodyLimitBytes,
    // Each phase of a request has a deadline; past it 408 and the connection closes. Node keeps
    // the headers' (and the first request's, enforceFirstHeaderDeadline); the whole request's is
    // ours (enforceRequestDeadline), which a sandbox's traffic is not held to. Node checks the
    // request deadline when it makes the server, before Fastify sets its own: hence 0 in both places.
    requestTimeout: 0,
    // Fastify's server as Fastify would make it, but a sandbox's traffic is taken before Fastify sees it.
    serverFactory: (handler) => {
      const server = clientServer(clients, (request, response) => takeSandbox(request, response) || handler(request, response));
      routeConnections(server, (socket, read, headers) => handOffSandboxConnection(options.sandboxes, socket, read, headers));
      return server;
    },
    clientErrorHandler: answerClientError,
    // Typed as Fastify's base logger so the instance keeps its default generic parameters.
    loggerInstance: options.logger as FastifyBaseLogger,
    // A caller's X-Request-Id (a proxy's) is kept when it is a plain token; otherwise a short
    // random one. It is in every log line of the request, answered as X-Request-Id, and a run
    // job's trace id when the job names none (routes/jobs.ts).
    requestIdHeader: false,
    logController: new OneLinePerRequest(),
    // Our validator and serializer for every context, those that add shared schemas (the named
    // bodies, route-schema.ts) included: Fastify rebuilds such a context's compilers from the
    // factory, which setValidatorCompiler would not reach. Plain JSON.stringify: schemas
    // document responses, they do not reshape them.
    schemaController: { compilersFactory: { buildValidator: (() => routeValidator) as unknown as ValidatorFactory, buildSerializer: () => () => (data) => JSON.stringify(data) } },
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : Math.random().toString(36).slice(2, 10);
    },
  });
  installErrorHandler(app);
  boundJsonBodies(app, options.bodyLimitValues);
  limitConnections(app.server, { total: clients.maxConnections, perAddress: clients.maxConnectionsPerAddress }, (address) =>
    app.log.debug({ address }, 'connection refused: too many open from this address'),
  );
  enforceFirstHeaderDeadline(app.server, clients.headersTimeoutMs);
  enforceRequestDeadline(app.server, clients.requestTimeoutMs, (request) => isSandboxTraffic(request) || isSyncIn(request));
  // Before auth and every other hook: a sandbox's traffic is its envd's, which checks its own token.
  installEnvdProxy(app, options.sandboxes, takeSandbox);
  await takeBack(app, options.sandboxes);
  closeOnUnreadBody(app);
  app.decorateRequest('apiKey', null);
  if (options.token) installBearerAuth(app, options.token, options.apiKeys);
  installSandboxForwarding(app, options.sandboxes);
  installMediaTypeGate(app);
  countRequests(app);
  app.addHook('onSend', async (request, reply) => void reply.header('x-request-id', request.id));
  await app.register(swagger, openapiOptions(options.token));
  // Snippets and tasks answer synchronously; together they take at most this many sandboxes.
  const synchronousSlots = new Semaphore(options.execConcurrency);
  await app.register(healthRoutes(options.frontDoor, options.worker, options.defaultBackend, options.execConcurrency, synchronousSlots));
  await app.register(jobRoutes(options.frontDoor));
  await app.register(eventRoutes(options.frontDoor));
  await app.register(backendRoutes(options.worker));
  await app.register(execRoutes(options.worker, synchronousSlots));
  await app.register(taskRoutes(options.worker, synchronousSlots));
  await app.register(runtimeRoutes(options.worker));
  await app.register(pistonRoutes(options.worker, synchronousSlots, options.bodyLimitValues));
  await app.register(sessionRoutes(options.sessions, options.sessionFileBytes));
  await app.register(sandboxRoutes(options.sandboxes));
  await app.register(e2bRoutes(options.sandboxes, options.templates));
  await app.register(volumeRoutes(options.sandboxes));
  await app.register(syncRoutes(options.sandboxes));
  await app.register(templateRoutes(options.templates));
  await app.register(e2bTemplateRoutes(options.templates.builds, options.templates.images));
  await app.register(dashboardRoutes());
  await app.register(metricsRoutes(options.frontDoor, options.worker));
  app.get('/openapi.json', { schema: { summary: 'This document', response: { 200: { type: 'object', description: 'OpenAPI 3.1' } } } }, async () => app.swagger());
  return app;
}
