import type { Command } from 'commander';
import type { ServiceSettings } from '../../config/schema.js';
import { SERVICE_DEFAULTS as defaults } from '../../config/service-defaults.js';
import { commandConfig } from '../command-config.js';
import { positiveOption } from '../flag-values.js';

interface WorkerFlags {
  database?: string;
  concurrency?: string;
  graceMs?: string;
  logLevel?: string;
}

export function registerWorker(program: Command): void {
  program
    .command('worker')
    .description('run jobs of the distributed mode: lease them from the PostgreSQL queue that `serve --database` front doors fill, on any machine that reaches it')
    .option('--database <url>', 'PostgreSQL connection string (or AGENT_RUNNER_DATABASE_URL)')
    .option('--concurrency <n>', 'jobs running at once (default: the number of cores)')
    .option('--grace-ms <n>', `on SIGTERM, how long running jobs may finish before they go back to the queue for another worker (default ${defaults.graceMs})`)
    .option('--log-level <level>', `pino level (default ${defaults.logLevel})`)
    .action(async (flags: WorkerFlags, command: Command) => {
      const [{ serviceLogger }, { startClusterWorker }, { RunnerRuntime }, { JobStaging }] = await Promise.all([
        import('../../util/service-logger.js'),
        import('../../composition/cluster.js'),
        import('../../runner/runtime.js'),
        import('../../runner/staging.js'),
      ]);
      const config = await commandConfig(command, {
        concurrency: positiveOption('--concurrency', flags.concurrency, { integer: true }),
        service: {
          databaseUrl: flags.database,
          graceMs: positiveOption('--grace-ms', flags.graceMs, { integer: true }),
          logLevel: flags.logLevel as ServiceSettings['logLevel'] | undefined,
        },
      });
      const url = config.service.databaseUrl;
      if (url === null) throw new Error('agent-runner worker needs a database: --database URL or AGENT_RUNNER_DATABASE_URL');
      const logger = serviceLogger(config.service.logLevel);
      const runtime = new RunnerRuntime(config);
      const orphans = await JobStaging.reapOrphans(runtime.stagingDir);
      if (orphans > 0) logger.info({ orphans }, 'removed work dirs left by a previous process');
      const worker = await startClusterWorker({ url, runtime, slots: config.concurrency, log: logger });
      logger.info({ worker_id: worker.workerId, concurrency: config.concurrency }, 'agent-runner worker running');
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        logger.info({ signal, grace_ms: config.service.graceMs }, 'draining');
        void worker.drain(config.service.graceMs).then(
          () => logger.flush(() => process.exit(0)),
          (error: Error) => {
            logger.error({ err: error }, 'shutdown failed');
            logger.flush(() => process.exit(1));
          },
        );
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
}
