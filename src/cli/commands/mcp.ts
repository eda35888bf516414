import type { Command } from 'commander';
import { backendOption } from '../backend-option.js';
import { commandConfig } from '../command-config.js';

export function registerMcp(program: Command): void {
  program
    .command('mcp')
    .description('serve the runner as Model Context Protocol tools on stdio (run_snippet, run_job, list_runtimes), for an MCP client to start')
    .addOption(backendOption())
    .option(
      '--workspace-root <dir>',
      "confine run_job's local_path workspaces to this directory (repeatable), as serve confines HTTP callers; without it, any directory you can read, as with `run`",
      (dir: string, previous: string[] | undefined) => [...(previous ?? []), dir],
    )
    .addHelpText('after', '\nstdout carries the protocol; diagnostics go to stderr. The server stops when stdin ends, or on SIGTERM or SIGINT.')
    .action(async (flags: { backend?: string; workspaceRoot?: string[] }, command: Command) => {
      const [{ BoundedStdioTransport }, { McpFace }, { RunnerRuntime }] = await Promise.all([
        import('../../mcp/stdio-transport.js'),
        import('../../mcp/server.js'),
        import('../../runner/runtime.js'),
      ]);
      // --backend is the default of calls that name none, not an override of those that do.
      const config = await commandConfig(command, {
        ...(flags.backend === undefined ? {} : { backends: { default: flags.backend } }),
        ...(flags.workspaceRoot === undefined ? {} : { runJob: { workspaceRoots: flags.workspaceRoot } }),
      });
      const runtime = new RunnerRuntime(config);
      const face = new McpFace({ runtime, caller: flags.workspaceRoot === undefined ? 'local' : 'remote' });
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
      await face.connect(new BoundedStdioTransport());
    });
}
