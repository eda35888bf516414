import { randomBytes } from 'node:crypto';
import { createWriteStream, realpathSync } from 'node:fs';
import { copyFile, rm, stat, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Option, type Command } from 'commander';
import { resolveExecutable } from '../../isolation/command-path.js';
import { argvProblem } from '../../contract/command-limits.js';
import { AgentExecError, usageError } from '../errors.js';
import { parseEnvPairs, readEnvFile } from '../job-env.js';
import { newJobId } from '../job-id.js';
import { createJobDir, ensureRoot, resetLogs, writeDefinition, type JobDefinition, type JobPaths, type NetworkMode, type SandboxMode } from '../job-store.js';
import { launchSupervisor } from '../launch.js';
import { DEFAULT_LIMITS, LIMIT_FLOORS, type JobLimits } from '../limits.js';
import { addObserveOptions, byteSize, cpuCount, httpUrl, processCount, rootOf, seconds, tags, type ObserveFlags } from '../options.js';
import { respond } from '../respond.js';
import { observeJob } from '../run-response.js';
import { checkBackend, checkSandboxAvailable } from '../sandbox-check.js';
import { executableVisible, locateBwrap, namedPathProblem, privateHome, readWorkspaceView } from '../../isolation/bubblewrap/workspace-profile.js';

interface RunFlags extends ObserveFlags {
  cwd?: string;
  env: string[];
  envFile: string[];
  inheritEnv: boolean;
  mask: string[];
  stdin?: string;
  stdinFile?: string;
  timeout?: number;
  killAfter: number;
  sandbox: SandboxMode;
  network: NetworkMode;
  backend: string;
  read: string[];
  write: string[];
  maxProcesses: number;
  memory: number;
  cpus?: number;
  tmpSize: number;
  maxLogBytes: number;
  tag: string[];
  notifyUrl?: string;
  notifyCommand?: string;
}

const DEFAULT_KILL_AFTER_S = 5;
const collect = (value: string, previous: string[]) => [...previous, value];
const MiB = 1024 * 1024;

export function registerRun(program: Command): void {
  const command = program
    .command('run')
    .description('start a background job from argv (never a shell string), watch it for a while, and report its state and output')
    .argument('<argv...>', 'the command and its arguments, after --')
    .option('--cwd <dir>', 'working directory (default: the current one); the only place a workspace-sandboxed job can write')
    .option('--env <KEY=VALUE>', 'set a variable (repeatable)', collect, [])
    .option('--env-file <file>', 'set the KEY=VALUE lines of a file (repeatable; --env wins)', collect, [])
    .option('--no-inherit-env', 'start from an empty environment instead of this one')
    .option('--mask <KEY>', "show this variable's value as *** in responses (repeatable)", collect, [])
    .addOption(new Option('--stdin <value>', "the job's stdin: this text, or - to pass on this command's stdin").conflicts('stdinFile'))
    .option('--stdin-file <file>', "the job's stdin: a copy of this file")
    .addOption(new Option('--tag <tag>', 'label the job, for list --tag (repeatable): words of letters, digits and hyphens joined by dots').argParser(tags).default([]))
    .addOption(
      new Option('--notify-url <url>', "POST the job's final status (the JSON status prints) here once it ends; retried with backoff for up to a minute").argParser(httpUrl),
    )
    .option(
      '--notify-command <command>',
      "run this shell command line (sh -c, unsandboxed, in a fresh private directory, never the job's cwd) once the job ends, its final status JSON on stdin; killed after a minute",
    )
    .addOption(new Option('--timeout <seconds>', 'SIGTERM the whole process tree after this long').argParser(seconds))
    .addOption(new Option('--kill-after <seconds>', 'SIGKILL the tree this long after a SIGTERM (timeout or kill)').argParser(seconds).default(DEFAULT_KILL_AFTER_S))
    .addOption(
      new Option('--sandbox <mode>', 'workspace: bubblewrap, sees the system (/usr, /etc without secrets, /opt), its cwd and --read/--write paths only; none: as is')
        .choices(['workspace', 'none'])
        .default('workspace'),
    )
    .option('--read <path>', 'also show this host path to a workspace-sandboxed job, read-only (repeatable)', collect, [])
    .option('--write <path>', 'also let a workspace-sandboxed job write this host path (repeatable)', collect, [])
    .addOption(new Option('--network <mode>', 'host, or none (needs --sandbox workspace)').choices(['host', 'none']).default('host'))
    .addOption(new Option('--backend <kind>', 'sandbox backend kind for --sandbox workspace: local_process (alias bubblewrap), gvisor, microvm').default('local_process'))
    .addOption(new Option('--max-processes <n>', 'processes and threads the job may have at once').argParser(processCount).default(DEFAULT_LIMITS.max_processes))
    .addOption(
      new Option('--memory <size>', 'memory of the job, its tmpfs included (e.g. 512M, 4G)')
        .argParser(byteSize(LIMIT_FLOORS.memory_bytes))
        .default(DEFAULT_LIMITS.memory_bytes, '4G'),
    )
    .addOption(new Option('--cpus <cores>', 'CPU bandwidth in cores, e.g. 2 or 0.5 (default: no bound)').argParser(cpuCount))
    .addOption(
      new Option('--tmp-size <size>', 'size of each private tmpfs of a workspace-sandboxed job: /tmp, /dev/shm, $HOME')
        .argParser(byteSize(LIMIT_FLOORS.tmp_bytes))
        .default(DEFAULT_LIMITS.tmp_bytes, '1G'),
    )
    .addOption(
      new Option('--max-log-bytes <size>', 'bytes kept of each log (stdout, stderr, full); past it a truncation mark, then the newest output')
        .argParser(byteSize(LIMIT_FLOORS.max_log_bytes))
        .default(DEFAULT_LIMITS.max_log_bytes, `${DEFAULT_LIMITS.max_log_bytes / MiB}M`),
    );
  addObserveOptions(command)
    .addHelpText(
      'after',
      '\nExample: agent-exec run --timeout 600 -- npm test\nThe job keeps running after this command answers; pass its job_id to status, tail, wait, kill or restart.',
    )
    .action(
      respond(async (argv: string[], flags: RunFlags) => {
        const root = await ensureRoot(rootOf(flags));
        const definition = await defineJob(argv, flags, root);
        const paths = await createJob(root, definition, flags);
        return observeJob('run', await launchSupervisor(root, paths), flags);
      }),
    );
}

async function defineJob(argv: string[], flags: RunFlags, root: string): Promise<Omit<JobDefinition, 'id'>> {
  // Bubblewrap takes 9,000 arguments with its own options: a longer command would start nothing.
  const tooLong = argvProblem(argv, 'the command');
  if (tooLong !== undefined) throw usageError(tooLong);
  const given = resolve(flags.cwd ?? process.cwd());
  if (!(await stat(given).catch(() => null))?.isDirectory()) throw usageError(`--cwd ${given} is not a directory`);
  const cwd = realpathSync(given);
  const fromFiles = await Promise.all(flags.envFile.map(readEnvFile));
  const env: Record<string, string> = Object.assign({}, ...fromFiles, parseEnvPairs(flags.env, '--env'));
  if (flags.network === 'none' && flags.sandbox === 'none') throw usageError('--network none is enforced by the sandbox: it needs --sandbox workspace');
  const sandboxed = flags.sandbox === 'workspace';
  const backend = sandboxed ? await checkBackend(flags.backend) : null;
  const bwrap = sandboxed ? checkSandboxAvailable(locateBwrap(process.env), cwd, root) : null;
  if (!sandboxed && flags.read.length + flags.write.length > 0) throw usageError('--read and --write shape the workspace sandbox: they need --sandbox workspace');
  const named = { read: flags.read.map((path) => namedPath(path, '--read', root)), write: flags.write.map((path) => namedPath(path, '--write', root)) };
  let visible = (_path: string) => true;
  if (sandboxed) {
    const plan = { cwd, view: readWorkspaceView(named), stateRoot: root };
    const home = privateHome(flags.inheritEnv ? (env.HOME ?? process.env.HOME) : env.HOME, plan);
    visible = (path: string) => executableVisible(path, { ...plan, home });
  }
  // Without PATH of its own the job would search glibc's default; ours finds what the caller meant.
  const executable = resolveExecutable(argv[0]!, (env.PATH ?? process.env.PATH)?.split(':'), cwd, visible);
  if (executable === null) {
    const hint = sandboxed
      ? ' where the workspace sandbox can see it (it shows /usr, /etc, /opt, the cwd, --read and --write paths, and the directory of an executable outside homes and /tmp: install it system-wide, put it under --cwd, name its directory with --read, or use --sandbox none)'
      : '';
    throw new AgentExecError('command_not_found', `${argv[0]} was not found as an executable file${hint}`);
  }
  const limits: JobLimits = { max_processes: flags.maxProcesses, memory_bytes: flags.memory, cpus: flags.cpus ?? null, tmp_bytes: flags.tmpSize, max_log_bytes: flags.maxLogBytes };
  return {
    argv,
    executable,
    cwd,
    env,
    inherit_env: flags.inheritEnv,
    masked: flags.mask,
    has_stdin: flags.stdin !== undefined || flags.stdinFile !== undefined,
    timeout_s: flags.timeout ?? null,
    kill_after_s: flags.killAfter,
    sandbox: flags.sandbox,
    backend,
    bwrap_path: bwrap,
    network: flags.network,
    limits,
    ...(sandboxed ? { read_paths: named.read, write_paths: named.write } : {}),
    tags: flags.tag,
    ...(flags.notifyUrl !== undefined || flags.notifyCommand !== undefined ? { notify: { url: flags.notifyUrl ?? null, command: flags.notifyCommand ?? null } } : {}),
    log_key: randomBytes(12).toString('hex'),
    created_at: new Date().toISOString(),
  };
}

/** A --read or --write path as the sandbox mounts it: its real path, checked. */
function namedPath(given: string, flag: string, root: string): string {
  let real: string;
  try {
    real = realpathSync(resolve(given));
  } catch (error) {
    throw usageError(`${flag} ${given}: ${(error as Error).message}`);
  }
  const problem = namedPathProblem(real, root);
  if (problem !== null) throw usageError(`${flag} ${given} cannot be shown to the job: ${problem}`);
  return real;
}

/** A job directory that has a definition has everything else too, stdin included. */
async function createJob(root: string, fields: Omit<JobDefinition, 'id'>, flags: RunFlags): Promise<JobPaths> {
  let paths: JobPaths | null = null;
  let id = '';
  while (paths === null) {
    id = newJobId();
    paths = await createJobDir(root, id);
  }
  try {
    await storeStdin(paths, flags);
    await resetLogs(paths);
    await writeDefinition(paths, { id, ...fields });
  } catch (error) {
    await rm(paths.dir, { recursive: true, force: true });
    throw error;
  }
  return paths;
}

/** The job's stdin is kept in its directory, so a restart feeds it the same bytes. */
async function storeStdin(paths: JobPaths, flags: RunFlags): Promise<void> {
  if (flags.stdinFile !== undefined) {
    await copyFile(flags.stdinFile, paths.stdin).catch((error: Error) => {
      throw usageError(`--stdin-file ${flags.stdinFile}: ${error.message}`);
    });
  } else if (flags.stdin === '-') {
    await pipeline(process.stdin, createWriteStream(paths.stdin, { mode: 0o600 }));
  } else if (flags.stdin !== undefined) {
    await writeFile(paths.stdin, flags.stdin, { mode: 0o600 });
  }
}
