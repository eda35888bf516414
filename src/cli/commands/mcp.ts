import type { Command } from 'commander';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { loadConfig } from '../../config/load.js';
import { McpFace } from '../../mcp/server.js';
import { RunnerRuntime } from '../../runner/runtime.js';
import { backendOption } from '../backend-option.js';

export function registerMcp(program: Command): void {
  program
    .command('mcp')
    .description('serve the runner as Model Context Protocol tools on stdio (run_snippet, run_job, list_runtimes), for an MCP client to start')
    .addOption(backendOption())
    .addHelpText('after', '\nstdout carries the protocol; diagnostics go to stderr. The server stops when stdin ends, or on SIGTERM or SIGINT.')
    .action(async (flags: { backend?: string }) => {
      // --backend is the default of calls that name none, not an override of those that do.
      const runtime = new RunnerRuntime(loadConfig(process.env, flags.backend === undefined ? {} : { backends: { default: flags.backend } }));
      const face = new McpFace({ runtime });
      let stopping: Promise<void> | undefined;
      const stop = (why: string) => {
        stopping ??= (async () => {
          process.stderr.write(`agent-runner mcp: stopping (${why})\n`);
          await face.close();
          await runtime.dispose();
        })().then(
          () => process.exit(0),
          (error: Error) => {
            process.stderr.write(`agent-runner mcp: stopping failed: ${error.message}\n`);
            process.exit(1);
          },
        );
      };
      // A client that goes away closes our stdin (and may leave stdout unwritable).
      process.stdin.once('end', () => stop('stdin closed'));
      process.stdout.on('error', () => stop('stdout closed'));
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
      await face.connect(new StdioServerTransport());
    });
}
