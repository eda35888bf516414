import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { Logger } from 'pino';
import type { ConfigOverrides } from '../../config/load.js';
import type { RunnerConfig, ServiceSettings } from '../../config/schema.js';
import { SERVICE_DEFAULTS as defaults } from '../../config/service-defaults.js';
import { commandConfig } from '../command-config.js';
import { countOption, positiveOption } from '../flag-values.js';

const MiB = 1024 * 1024;

interface ServeFlags {
  addr?: string;
  storeDir?: string;
  token?: string;
  /** false for --no-auth; commander's true when it is absent is dropped, so a config file's `auth` holds. */
  auth?: boolean;
  concurrency?: string;
  queueCapacity?: string;
  bodyLimitMb?: string;
  graceMs?: string;
  retentionDays?: string;
  retentionCount?: string;
  logLevel?: string;
  workspaceRoot?: string[];
  database?: string;
  workers?: string;
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('serve the run-job and snippet contracts over HTTP, with a queue and a durable run store')
    .option('--addr <host:port>', `listen address (anything but loopback refuses --no-auth; default ${defaults.addr})`)
    .option('--store-dir <dir>', `run store directory (default ${defaults.storeDir})`)
    .option(
      '--token <token>',
      'API token for Authorization: Bearer (or AGENT_RUNNER_TOKEN); without one, a token is generated into <state dir>/service-token on first start, printed once, and reused',
    )
    .option('--no-auth', 'serve without authentication (loopback only): any local process, jobs with network access included, can use the API')
    .option('--concurrency <n>', 'jobs and snippets running at once (default: the number of cores)')
    .option(
      '--database <url>',
      'PostgreSQL connection string (or AGENT_RUNNER_DATABASE_URL): the distributed mode, where any number of front doors and `agent-runner worker` processes share the queue, the run store and the events; default: the embedded queue and on-disk store',
    )
    .option('--workers <n>', 'job slots run beside this front door (default: --concurrency); with --database, 0 makes it a front door only')
    .option('--queue-capacity <n>', `jobs waiting before 503 queue.full (default ${defaults.queueCapacity})`)
    .option('--body-limit-mb <n>', `largest request body (default ${defaults.bodyLimitBytes / MiB})`)
    .option('--grace-ms <n>', `on SIGTERM, how long running jobs may finish before they are canceled (default ${defaults.graceMs})`)
    .option('--retention-days <n>', 'delete terminal runs older than this')
    .option('--retention-count <n>', 'keep at most this many runs (oldest terminal ones go first)')
    .option(
      '--workspace-root <dir>',
      'a host directory under which HTTP callers may snapshot local_path workspaces (repeatable; or AGENT_RUNNER_WORKSPACE_ROOTS, colon-separated); none: every local_path workspace is refused over HTTP',
      (dir: string, previous: string[] | undefined) => [...(previous ?? []), dir],
    )
    .option('--log-level <level>', `pino level: fatal, error, warn, info, debug (default ${defaults.logLevel})`)
    .addHelpText(
      'after',
      '\nThe defaults shown are the built-in ones; a --config file and AGENT_RUNNER_* variables change them (see `agent-runner config`), these flags override both.',
    )
    .action(async (flags: ServeFlags, command: Command) => {
      if (command.getOptionValueSource('auth') === 'default') delete flags.auth;
      const [{ serviceLogger }, { parseHttpAddress }, { startService }, { RunnerRuntime }, { retentionPolicy }] = await Promise.all([
        import('../../util/service-logger.js'),
        import('../../http/listen-address.js'),
        import('../../composition/service.js'),
        import('../../runner/runtime.js'),
        import('../../util/retention.js'),
      ]);
      const config = await commandConfig(command, overrides(flags));
      const settings = config.service;
      const workers = settings.workers ?? config.concurrency;
      if (workers === 0 && settings.databaseUrl === null) throw new Error('--workers 0 needs --database: without one, no other process runs the jobs this service accepts');
      const logger = serviceLogger(settings.logLevel);
      const running = await startService({
        address: parseHttpAddress(settings.addr),
        storeDir: resolve(settings.storeDir),
        token: await serviceToken(config, logger),
        queueCapacity: settings.queueCapacity,
        concurrency: config.concurrency,
        workers,
        databaseUrl: settings.databaseUrl,
        bodyLimitBytes: settings.bodyLimitBytes,
        clients: settings.clients,
        retention: retentionPolicy(settings.retention),
        logger,
        runtime: new RunnerRuntime(config),
      });
      if (!settings.auth) logger.warn({ url: running.url }, 'authentication is off (--no-auth): any local process, jobs with network access included, can use this API');
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

/**
 * The bearer token every route but /health requires: --token, AGENT_RUNNER_TOKEN or the config
 * file; else the one in the state dir, generated on first start and printed there once, to
 * stderr (the terminal of whoever started the service, never the JSON logs on stdout). Null
 * only when authentication is turned off.
 */
async function serviceToken(config: RunnerConfig, logger: Logger): Promise<string | null> {
  if (!config.service.auth) return null;
  if (config.service.token !== null) return config.service.token;
  const { loadOrCreateServiceToken } = await import('../../http/service-token.js');
  const { token, file, generated } = loadOrCreateServiceToken(config.stateDir);
  if (generated) {
    process.stderr.write(
      `agent-runner: no API token was given (--token, AGENT_RUNNER_TOKEN, service.token), so one was generated into ${file} (mode 0600) and is reused on every later start.\n` +
        `Every route but /health needs the header:\n    Authorization: Bearer ${token}\n`,
    );
  }
  logger.info({ token_file: file, generated }, 'bearer token from the state dir');
  return token;
}

/** Only the flags given; the configuration holds every default. */
function overrides(flags: ServeFlags): ConfigOverrides {
  const integer = (flag: string, text: string | undefined) => positiveOption(flag, text, { integer: true });
  const bodyLimitMb = positiveOption('--body-limit-mb', flags.bodyLimitMb, { integer: false });
  return {
    concurrency: integer('--concurrency', flags.concurrency),
    runJob: { workspaceRoots: flags.workspaceRoot },
    service: {
      addr: flags.addr,
      storeDir: flags.storeDir,
      token: flags.token,
      auth: flags.auth,
      queueCapacity: integer('--queue-capacity', flags.queueCapacity),
      bodyLimitBytes: bodyLimitMb === undefined ? undefined : Math.round(bodyLimitMb * MiB),
      graceMs: integer('--grace-ms', flags.graceMs),
      retention: { maxAgeDays: positiveOption('--retention-days', flags.retentionDays, { integer: false }), maxCount: integer('--retention-count', flags.retentionCount) },
      // The schema checks the level once the layers are merged.
      logLevel: flags.logLevel as ServiceSettings['logLevel'] | undefined,
      databaseUrl: flags.database,
      workers: countOption('--workers', flags.workers),
    },
  };
}
