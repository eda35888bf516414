const MiB = 1024 * 1024;

/**
 * Defaults of the service settings that `serve --help` and `worker --help` print, apart from
 * the schema (which takes its defaults from here): the help is shown without loading TypeBox.
 */
export const SERVICE_DEFAULTS = {
  addr: '127.0.0.1:3000',
  storeDir: './agent-runner-runs',
  queueCapacity: 1000,
  bodyLimitBytes: 10 * MiB,
  graceMs: 30_000,
  logLevel: 'info',
} as const;
