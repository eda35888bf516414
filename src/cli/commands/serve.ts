import { resolve } from 'node:path';
import type { Command } from 'commander';
import { pino } from 'pino';
import { loadConfig, type ConfigOverrides } from '../../config/load.js';
import { DEFAULT_SERVICE_SETTINGS as defaults, type ServiceSettings } from '../../config/schema.js';
import { parseHttpAddress } from '../../http/listen-address.js';
import { startService } from '../../http/service.js';
import { RunnerRuntime } from '../../runner/runtime.js';
import { positiveOption } from '../flag-values.js';

const MiB = 1024 * 1024;

interface ServeFlags {
  addr?: string;
  storeDir?: string;
  token?: string;
  concurrency?: string;
  queueCapacity?: string;
  bodyLimitMb?: string;
  graceMs?: string;
  retentionDays?: string;
  retentionCount?: string;
  logLevel?: string;
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('serve the run-job and snippet contracts over HTTP, with a queue and a durable run store')
    .option('--addr <host:port>', `listen address (anything but loopback needs a token; default ${defaults.addr})`)
    .option('--store-dir <dir>', `run store directory (default ${defaults.storeDir})`)
    .option('--token <token>', 'API token for Authorization: Bearer (or AGENT_RUNNER_TOKEN)')
    .option('--concurrency <n>', 'jobs running at once (default: the number of cores)')
    .option('--queue-capacity <n>', `jobs waiting before 503 queue.full (default ${defaults.queueCapacity})`)
    .option('--body-limit-mb <n>', `largest request body (default ${defaults.bodyLimitBytes / MiB})`)
    .option('--grace-ms <n>', `on SIGTERM, how long running jobs may finish before they are canceled (default ${defaults.graceMs})`)
    .option('--retention-days <n>', 'delete terminal runs older than this')
    .option('--retention-count <n>', 'keep at most this many runs (oldest terminal ones go first)')
    .option('--log-level <level>', `pino level: fatal, error, warn, info, debug (default ${defaults.logLevel})`)
    .addHelpText(
      'after',
      '\nThe defaults shown are the built-in ones; a --config file and AGENT_RUNNER_* variables change them (see `agent-runner config`), these flags override both.',
    )
    .action(async (flags: ServeFlags) => {
      const config = loadConfig(process.env, overrides(flags));
      const settings = config.service;
      // Asynchronous: a log line must not block the event loop that answers every client.
      const logger = pino({ level: settings.logLevel, redact: ['req.headers.authorization'] }, pino.destination({ sync: false }));
      const running = await startService({
        address: parseHttpAddress(settings.addr),
        storeDir: resolve(settings.storeDir),
        token: settings.token,
        queueCapacity: settings.queueCapacity,
        concurrency: config.concurrency,
        bodyLimitBytes: settings.bodyLimitBytes,
        retention: { maxAgeMs: settings.retention.maxAgeDays === null ? null : settings.retention.maxAgeDays * 86_400_000, maxCount: settings.retention.maxCount },
        logger,
        runtime: new RunnerRuntime(config),
      });
      logger.info({ url: running.url }, 'agent-runner serving');
      let stopping = false;
      const exit = (code: number) => logger.flush(() => process.exit(code));
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        logger.info({ signal, grace_ms: settings.graceMs }, 'draining');
        void running.shutdown(settings.graceMs).then(
          () => exit(0),
          (error: Error) => {
            logger.error({ err: error }, 'shutdown failed');
            exit(1);
          },
        );
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
}

/** Only the flags given; the configuration holds every default. */
function overrides(flags: ServeFlags): ConfigOverrides {
  const integer = (flag: string, text: string | undefined) => positiveOption(flag, text, { integer: true });
  const bodyLimitMb = positiveOption('--body-limit-mb', flags.bodyLimitMb, { integer: false });
  return {
    concurrency: integer('--concurrency', flags.concurrency),
    service: {
      addr: flags.addr,
      storeDir: flags.storeDir,
      token: flags.token,
      queueCapacity: integer('--queue-capacity', flags.queueCapacity),
      bodyLimitBytes: bodyLimitMb === undefined ? undefined : Math.round(bodyLimitMb * MiB),
      graceMs: integer('--grace-ms', flags.graceMs),
      retention: { maxAgeDays: positiveOption('--retention-days', flags.retentionDays, { integer: false }), maxCount: integer('--retention-count', flags.retentionCount) },
      // The schema checks the level once the layers are merged.
      logLevel: flags.logLevel as ServiceSettings['logLevel'] | undefined,
    },
  };
}
