import type { Command } from 'commander';
import { commandConfig } from '../command-config.js';
import { positiveOption } from '../flag-values.js';

export function registerGuest(program: Command): void {
  program
    .command('guest')
    .description('serve framed snippet requests (4-byte big-endian length + JSON) on a socket')
    .requiredOption('--listen <address>', 'unix:/path/to.sock, tcp:HOST:PORT or vsock:PORT')
    .option('--concurrency <n>', 'jobs running at once across all connections (default: number of cores)')
    .option('--max-frame-bytes <n>', 'largest frame accepted (default 16 MiB)')
    .option('--token <token>', 'every connection must first send {"auth": TOKEN} (or AGENT_RUNNER_GUEST_TOKEN); required on a non-loopback tcp: address')
    .option('--insecure', 'listen on a non-loopback tcp: address without a token: anyone who reaches it runs code')
    .action(async (flags: { listen: string; concurrency?: string; maxFrameBytes?: string; token?: string; insecure?: boolean }, command: Command) => {
      const [{ startGuestServer, formatListenAddress }, { parseListenAddress }, { RunnerRuntime }] = await Promise.all([
        import('../../guest/server.js'),
        import('../../guest/listen-address.js'),
        import('../../runner/runtime.js'),
      ]);
      const token = flags.token ?? (process.env.AGENT_RUNNER_GUEST_TOKEN || undefined);
      const runtime = new RunnerRuntime(await commandConfig(command));
      const server = await startGuestServer(parseListenAddress(flags.listen), {
        runtime,
        ...(token !== undefined ? { token } : {}),
        ...(flags.insecure ? { insecure: true } : {}),
        ...(flags.concurrency !== undefined ? { concurrency: positiveOption('--concurrency', flags.concurrency, { integer: true })! } : {}),
        ...(flags.maxFrameBytes !== undefined ? { maxFrameBytes: positiveOption('--max-frame-bytes', flags.maxFrameBytes, { integer: true })! } : {}),
        onConnectionError: (error) => process.stderr.write(`connection error: ${error.message}\n`),
      });
      process.stderr.write(`guest runner listening on ${formatListenAddress(server.address)}\n`);
      const stop = () =>
        void server
          .close()
          .then(() => runtime.dispose())
          .then(() => process.exit(0));
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
    });
}
