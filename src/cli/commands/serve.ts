import { resolve } from 'node:path';
import type { Command } from 'commander';
import { pino } from 'pino';
import { parseHttpAddress } from '../../http/listen-address.js';
import { positiveOption } from '../flag-values.js';
import { SERVICE_DEFAULTS, startService } from '../../http/service.js';

interface ServeFlags {
  addr: string;
  storeDir: string;
  token?: string;
  concurrency?: string;
  queueCapacity?: string;
  bodyLimitMb?: string;
  graceMs?: string;
  retentionDays?: string;
  retentionCount?: string;
  logLevel: string;
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('serve the run-job and snippet contracts over HTTP, with a queue and a durable run store')
    .option('--addr <host:port>', 'listen address (anything but loopback needs a token)', '127.0.0.1:3000')
    .option('--store-dir <dir>', 'run store directory', './agent-runner-runs')
    .option('--token <token>', 'API token for Authorization: Bearer (or AGENT_RUNNER_TOKEN)')
    .option('--concurrency <n>', `jobs running at once (default ${SERVICE_DEFAULTS.concurrency}, the number of cores)`)
    .option('--queue-capacity <n>', `jobs waiting before 503 queue.full (default ${SERVICE_DEFAULTS.queueCapacity})`)
    .option('--body-limit-mb <n>', 'largest request body (default 10)')
    .option('--grace-ms <n>', `on SIGTERM, how long running jobs may finish before they are canceled (default ${SERVICE_DEFAULTS.graceMs})`)
    .option('--retention-days <n>', 'delete terminal runs older than this')
    .option('--retention-count <n>', 'keep at most this many runs (oldest terminal ones go first)')
    .option('--log-level <level>', 'pino level: fatal, error, warn, info, debug', 'info')
    .action(async (flags: ServeFlags) => {
      const number = (flag: string, text: string | undefined) => positiveOption(flag, text, { integer: false }) ?? null;
      const grace = number('--grace-ms', flags.graceMs) ?? SERVICE_DEFAULTS.graceMs;
      const retentionDays = number('--retention-days', flags.retentionDays);
      const logger = pino({ level: flags.logLevel, redact: ['req.headers.authorization'] });
      const running = await startService({
        address: parseHttpAddress(flags.addr),
        storeDir: resolve(flags.storeDir),
        token: flags.token ?? process.env.AGENT_RUNNER_TOKEN ?? null,
        queueCapacity: number('--queue-capacity', flags.queueCapacity) ?? SERVICE_DEFAULTS.queueCapacity,
        concurrency: number('--concurrency', flags.concurrency) ?? SERVICE_DEFAULTS.concurrency,
        bodyLimitBytes: (number('--body-limit-mb', flags.bodyLimitMb) ?? SERVICE_DEFAULTS.bodyLimitBytes / 1024 / 1024) * 1024 * 1024,
        retention: { maxAgeMs: retentionDays === null ? null : retentionDays * 86_400_000, maxCount: number('--retention-count', flags.retentionCount) },
        logger,
      });
      logger.info({ url: running.url }, 'agent-runner serving');
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        logger.info({ signal, grace_ms: grace }, 'draining');
        void running.shutdown(grace).then(
          () => process.exit(0),
          (error: Error) => {
            logger.error({ err: error }, 'shutdown failed');
            process.exit(1);
          },
        );
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
}
