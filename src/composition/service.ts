import type { FastifyInstance } from 'fastify';
import { hostname } from 'node:os';
import { pino, type Logger } from 'pino';
import type { ServiceSettings } from '../config/schema.js';
import { buildApp } from '../http/app.js';
import { isLoopback, type HttpAddress } from '../http/listen-address.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import type { JobDesk } from '../jobs/job-desk.js';
import type { RetentionPolicy } from '../util/retention.js';
import { startClusterFrontDoor } from './cluster.js';
import { startProcessMetrics } from '../util/metrics.js';
import { startEmbedded } from './embedded.js';
import { servedTemplateStore } from '../templates/served-templates.js';
import { templateNames } from '../sandboxes/templates.js';

/** What the service runs on, as `agent-runner serve` derives it from the configuration (src/config/). */
export interface ServiceConfig {
  address: HttpAddress;
  storeDir: string;
  /** Every route but /health needs it as `Authorization: Bearer`; null only for `--no-auth`. */
  token: string | null;
  /** Jobs that may wait in the queue before submissions get 503 queue.full. */
  queueCapacity: number;
  /** Snippets and tasks answered at once. */
  concurrency: number;
  /** Job slots of the worker process beside the front door. */
  workers: number;
  /** PostgreSQL: the distributed mode (queue, run store and events shared by every front door and worker). Null: embedded. */
  databaseUrl: string | null;
  bodyLimitBytes: number;
  /** Header, request, keep-alive and idle deadlines; connections in all and per client address. */
  clients: ServiceSettings['clients'];
  retention: RetentionPolicy;
  /** A pino logger; `false` logs nothing. */
  logger: Logger | false;
  /** Admission reads its limits and backend kinds; the worker process runs on its configuration. */
  runtime: RunnerRuntime;
}

export interface RunningService {
  app: FastifyInstance;
  frontDoor: JobDesk;
  url: string;
  /** SIGTERM behaviour: stop accepting (503 queue.closed), finish or cancel running jobs, close. */
  shutdown(graceMs: number): Promise<void>;
}

/**
 * The composition root of `agent-runner serve`. The service: a front door (HTTP, admission, the queue, the run store) and one worker process
 * beside it that runs what the queue hands out, plus snippets, tasks and sessions. Embedded by default
 * (the in-process queue and the on-disk store; recovers what a previous process left); with a
 * database URL, one of the cluster's front doors (postgres/). Then listens.
 */
export async function startService(config: ServiceConfig): Promise<RunningService> {
  if (!isLoopback(config.address.host) && !config.token) {
    throw new Error(`refusing to listen on ${config.address.host} without authentication: drop --no-auth (service.auth: false), or listen on a loopback address`);
  }
  const logger = config.logger || pino({ level: 'silent' });
  startProcessMetrics('front_door');
  let address = '';
  const side = config.databaseUrl
    ? await startClusterFrontDoor({
        url: config.databaseUrl,
        runtime: config.runtime,
        slots: config.workers,
        desk: { queueCapacity: config.queueCapacity, retention: config.retention },
        address: () => address,
        token: config.token,
        log: logger,
      })
    : await startEmbedded({
        runtime: config.runtime,
        storeDir: config.storeDir,
        queueCapacity: config.queueCapacity,
        slots: config.workers,
        retention: config.retention,
        log: logger,
      });
  const app = await buildApp({
    frontDoor: side.desk,
    worker: side.worker,
    sessions: side.sessions,
    sandboxes: side.sandboxes,
    templates: { configured: templateNames(config.runtime.config.sandboxes), ...servedTemplateStore(config.runtime.config, config.runtime.backends.get('local_process')) },
    sessionFileBytes: config.runtime.config.sessions.maxFileBytes,
    defaultBackend: config.runtime.backends.defaultKind,
    token: config.token,
    apiKeys: config.runtime.config.service.apiKeys,
    bodyLimitBytes: config.bodyLimitBytes,
    bodyLimitValues: config.runtime.config.service.bodyLimitValues,
    clients: config.clients,
    execConcurrency: config.concurrency,
    logger,
  });
  const url = await app.listen({ host: config.address.host, port: config.address.port });
  address = reachableUrl(url, config.address.host);
  return {
    app,
    frontDoor: side.desk,
    url,
    async shutdown(graceMs: number) {
      // Sessions end at once (new ones refused) while jobs have their grace.
      await Promise.all([side.drain(graceMs), side.worker.closeSessions()]);
      // Admission's probes and toolchain lookups ran on this runtime; the worker disposes of its own.
      await config.runtime.dispose();
      await app.close();
    },
  };
}

/**
 * Our URL as other front doors reach it. Listening on every interface, Fastify names a
 * loopback address: the host's name is what a peer on another machine can resolve.
 */
function reachableUrl(url: string, listenHost: string): string {
  const parsed = new URL(url);
  if (['0.0.0.0', '::', ''].includes(listenHost)) parsed.hostname = hostname();
  return parsed.origin;
}
