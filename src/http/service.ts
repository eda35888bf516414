import type { FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { RunnerRuntime } from '../runner/runtime.js';
import { JobService } from '../service/job-service.js';
import { RunStore } from '../store/run-store.js';
import { buildApp } from './app.js';
import { isLoopback, type HttpAddress } from './listen-address.js';

/** What the service runs on, as `agent-runner serve` derives it from the configuration (src/config/). */
export interface ServiceConfig {
  address: HttpAddress;
  storeDir: string;
  token: string | null;
  /** Jobs that may wait in the queue before submissions get 503 queue.full. */
  queueCapacity: number;
  concurrency: number;
  bodyLimitBytes: number;
  retention: { maxAgeMs: number | null; maxCount: number | null };
  /** A pino logger; `false` logs nothing. */
  logger: Logger | false;
  runtime?: RunnerRuntime;
}

export interface RunningService {
  app: FastifyInstance;
  service: JobService;
  url: string;
  /** SIGTERM behaviour: stop accepting (503 queue.closed), finish or cancel running jobs, close. */
  shutdown(graceMs: number): Promise<void>;
}

/** Builds the service on its store (recovering what a previous process left) and listens. */
export async function startService(config: ServiceConfig): Promise<RunningService> {
  if (!isLoopback(config.address.host) && !config.token) {
    throw new Error(`refusing to listen on ${config.address.host} without an API token: pass --token or set AGENT_RUNNER_TOKEN`);
  }
  const runtime = config.runtime ?? RunnerRuntime.shared();
  const logger = config.logger || pino({ level: 'silent' });
  const service = new JobService(runtime, new RunStore(config.storeDir), {
    capacity: config.queueCapacity,
    concurrency: config.concurrency,
    retention: config.retention,
    log: logger,
  });
  const recovery = await service.start();
  logger.info(recovery, 'run store loaded');
  const app = await buildApp({ runtime, service, token: config.token, bodyLimitBytes: config.bodyLimitBytes, execConcurrency: config.concurrency, logger });
  const url = await app.listen({ host: config.address.host, port: config.address.port });
  return {
    app,
    service,
    url,
    async shutdown(graceMs: number) {
      await service.drain(graceMs);
      await app.close();
      await runtime.dispose();
    },
  };
}
