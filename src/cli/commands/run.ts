import { resolve } from 'node:path';
import { Option, type Command } from 'commander';
import type { RunJobResult } from '../../contract/run-job.js';
import { exitAfterFlush, printJson } from '../../util/stdio.js';
import { backendOption, withBackend } from '../backend-option.js';
import { withCommandRuntime } from '../command-config.js';
import { cancelOnInterrupt } from '../interrupts.js';
import { pairsOption, positiveOption } from '../flag-values.js';
import { readRequestJson } from '../request-input.js';

interface RunFlags {
  request?: string;
  workspace?: string;
  jobId?: string;
  cwd?: string;
  env: string[];
  allowEnv: string[];
  allowCommand: string[];
  allowShell?: boolean;
  network?: string;
  timeoutMs?: string;
  memoryMb?: string;
  artifact: string[];
  include: string[];
  exclude: string[];
  backend?: string;
  server?: string;
  token?: string;
  follow?: boolean;
}

const collect = (value: string, previous: string[]) => [...previous, value];
/** What builds a request from flags; --request brings a whole one, which they would silently not change. */
const REQUEST_FLAGS = ['workspace', 'jobId', 'cwd', 'env', 'allowEnv', 'allowCommand', 'allowShell', 'network', 'timeoutMs', 'memoryMb', 'artifact', 'include', 'exclude'];

export function registerRun(program: Command): void {
  program
    .command('run')
    .description('run one RunJobRequest (--request FILE, or JSON on stdin, or the flags below with -- argv) and print the RunJobResult')
    .argument('[argv...]', 'the command, after --')
    .addOption(
      new Option('-r, --request <file>', 'read the RunJobRequest from a file ("-" for stdin): the whole request, so no argv or flag that builds one goes with it').conflicts(
        REQUEST_FLAGS,
      ),
    )
    .option('-w, --workspace <dir>', 'snapshot this directory as the work dir')
    .option('--job-id <id>', 'job id (default job_<uuid>)')
    .option('--cwd <dir>', 'working directory inside the snapshot')
    .option('-e, --env <KEY=VALUE>', 'environment addition (repeatable; also allowed by policy)', collect, [])
    .option('--allow-env <KEY>', 'allow a request env key (repeatable)', collect, [])
    .option('--allow-command <name>', 'restrict argv[0] to these basenames (repeatable)', collect, [])
    .option('--allow-shell', 'allow shells and inline interpreter code')
    .option('--network <mode>', 'none (default) or allow')
    .option('--timeout-ms <n>', 'wall-clock limit')
    .option('--memory-mb <n>', 'memory limit of the process tree')
    .option('-a, --artifact <glob>', 'collect matching files after the run (repeatable)', collect, [])
    .option('--include <glob>', 'snapshot only matching files (repeatable)', collect, [])
    .option('--exclude <glob>', 'leave matching files out of the snapshot (repeatable)', collect, [])
    .addOption(backendOption())
    .option('--server <url>', 'send the job to an agent-runner service (or AGENT_RUNNER_URL) instead of running it here; a --workspace is sent as a tar.gz archive')
    .option('--token <token>', "the service's token (or AGENT_RUNNER_TOKEN)")
    .option(
      '--follow',
      'print the job\'s events as they happen, one JSON object a line ({"event": "stdout", "data": {"text": ...}}, ... then "end" with the result) instead of the result alone',
    )
    .addHelpText(
      'after',
      '\nExit status: 0 when the result is completed, 1 otherwise.\nExamples:\n  agent-runner run --workspace . --artifact "dist/**" -- python3 build.py\n  agent-runner run --server http://runner:3000 --follow --workspace . -- python3 test.py',
    )
    .action(async (argv: string[], flags: RunFlags, command: Command) => {
      if (flags.request !== undefined && argv.length > 0) {
        throw new Error(
          `--request ${flags.request} is the whole RunJobRequest, its command included: put the command in its command.argv, or drop --request and give the command after -- (got ${JSON.stringify(argv)})`,
        );
      }
      const request = withBackend(flags.request !== undefined || argv.length === 0 ? await readRequestJson(flags.request) : requestFromFlags(argv, flags), flags.backend);
      const server = flags.server ?? process.env.AGENT_RUNNER_URL;
      let result: RunJobResult;
      if (server) {
        const { runOnService } = await import('../remote-run.js');
        result = await runOnService(server, flags.token, request as Record<string, unknown>, flags.follow ?? false);
      } else {
        const [{ runJob }, { runFollowingHere }] = await Promise.all([import('../../runner/run-job.js'), import('../remote-run.js')]);
        result = await withCommandRuntime(command, (runtime) =>
          flags.follow ? runFollowingHere(request, runtime) : cancelOnInterrupt((signal) => runJob(request, { runtime, signal })),
        );
      }
      if (!flags.follow) printJson(result);
      exitAfterFlush(result.status === 'completed' ? 0 : 1);
    });
}

function requestFromFlags(argv: string[], flags: RunFlags): unknown {
  const env = pairsOption('--env', flags.env);
  const number = (flag: string, text: string | undefined) => positiveOption(flag, text, { integer: true });
  const memoryMb = number('--memory-mb', flags.memoryMb);
  return {
    ...(flags.jobId ? { job_id: flags.jobId } : {}),
    ...(flags.workspace
      ? {
          workspace: {
            source: 'local_path',
            path: resolve(flags.workspace),
            ...(flags.include.length ? { include: flags.include } : {}),
            ...(flags.exclude.length ? { exclude: flags.exclude } : {}),
          },
        }
      : {}),
    command: { argv, ...(flags.cwd ? { cwd: flags.cwd } : {}), ...(Object.keys(env).length ? { env } : {}) },
    policy: {
      ...(flags.allowCommand.length ? { allowed_commands: flags.allowCommand } : {}),
      allowed_env: [...new Set([...flags.allowEnv, ...Object.keys(env)])],
      allow_shell: flags.allowShell ?? false,
      network: flags.network ?? 'none',
    },
    limits: {
      ...(flags.timeoutMs ? { timeout_ms: number('--timeout-ms', flags.timeoutMs) } : {}),
      ...(memoryMb ? { memory_bytes: memoryMb * 1024 * 1024 } : {}),
    },
    ...(flags.artifact.length ? { artifacts: flags.artifact } : {}),
  };
}
