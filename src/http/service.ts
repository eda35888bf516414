import type { FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { MemoryQueue } from '../queue/memory-queue.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import { LocalJobEvents } from '../service/events.js';
import type { ServiceSettings } from '../config/schema.js';
import { FrontDoor } from '../service/front-door.js';
import type { JobDesk } from '../service/job-desk.js';
import { startClusterFrontDoor } from '../postgres/serve-cluster.js';
import { WorkerProcess } from '../service/worker-process.js';
import { Sessions } from '../session/sessions.js';
import { DiskRunStore } from '../store/disk-store.js';
import type { RetentionPolicy } from '../util/retention.js';
import { buildApp } from './app.js';
import { isLoopback, type HttpAddress } from './listen-address.js';

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
 * The service: a front door (HTTP, admission, the queue, the run store) and one worker process
 * beside it that runs what the queue hands out, plus snippets and tasks. Embedded by default
 * (the in-process queue and the on-disk store; recovers what a previous process left); with a
 * database URL, one of the cluster's front doors (postgres/). Then listens.
 */
export async function startService(config: ServiceConfig): Promise<RunningService> {
  if (!isLoopback(config.address.host) && !config.token) {
    throw new Error(`refusing to listen on ${config.address.host} without authentication: drop --no-auth (service.auth: false), or listen on a loopback address`);
  }
  const logger = config.logger || pino({ level: 'silent' });
  const side = config.databaseUrl
    ? await startClusterFrontDoor({
        url: config.databaseUrl,
        runtime: config.runtime,
        slots: config.workers,
        desk: { queueCapacity: config.queueCapacity, retention: config.retention },
        log: logger,
      })
    : await startEmbedded(config, logger);
  const sessions = new Sessions(config.runtime);
  const app = await buildApp({
    frontDoor: side.desk,
    worker: side.worker,
    sessions,
    sessionFileBytes: config.runtime.config.sessions.maxFileBytes,
    defaultBackend: config.runtime.backends.defaultKind,
    token: config.token,
    bodyLimitBytes: config.bodyLimitBytes,
    clients: config.clients,
    execConcurrency: config.concurrency,
    logger,
  });
  const url = await app.listen({ host: config.address.host, port: config.address.port });
  return {
    app,
    frontDoor: side.desk,
    url,
    async shutdown(graceMs: number) {
      await Promise.all([side.drain(graceMs), sessions.close()]);
      // The sessions' sandboxes ran in this process, on this runtime: its pre-started
      // sandboxes and idle work-dir mounts go with it (the worker disposes of its own).
      await config.runtime.dispose();
      await app.close();
    },
  };
}

/** The front door over the in-process queue and the on-disk store, its worker process forked beside it. */
async function startEmbedded(config: ServiceConfig, logger: Logger): Promise<{ desk: FrontDoor; worker: WorkerProcess; drain(graceMs: number): Promise<void> }> {
  const { runtime } = config;
  const frontDoor = new FrontDoor(
    runtime,
    { queue: new MemoryQueue(config.queueCapacity), store: new DiskRunStore(config.storeDir), events: new LocalJobEvents() },
    { retention: config.retention, log: logger },
  );
  const recovery = await frontDoor.start();
  logger.info(recovery, 'run store loaded');
  const worker = await WorkerProcess.start({
    config: runtime.config,
    slots: config.workers,
    ports: frontDoor.workerPorts(),
    onLost: (jobIds) => frontDoor.workerLost(jobIds),
    log: logger,
  });
  return {
    desk: frontDoor,
    worker,
    async drain(graceMs: number) {
      await frontDoor.close();
      const graceOver = setTimeout(() => worker.cancelAll(), graceMs);
      await frontDoor.idle();
      clearTimeout(graceOver);
      await worker.stop();
      await frontDoor.flushStore();
    },
  };
}
