import { readFile } from 'node:fs/promises';
import { Option, type Command } from 'commander';
import type { SandboxCreateRequest, SandboxExecRequest } from '../../contract/sandbox.js';
import type { AgentUser } from '../../contract/sandbox-agent.js';
import type { VolumeMount } from '../../contract/volumes.js';
import { readStdin } from '../../util/stdio.js';
import { backendOption } from '../backend-option.js';
import { pairsOption, positiveOption } from '../flag-values.js';
import { answer, deliverFile, localBytes, withServer, type ServerFlags } from '../server-call.js';

/** contract/sandbox-agent.ts AGENT_USERS, written out: the CLI loads no schema library to start (bundle-cli). */
const USERS: AgentUser[] = ['user', 'root'];

const collect = (value: string, previous: string[]) => [...previous, value];

/** NAME:PATH[:ro] as a volume mount. */
function volumeMount(text: string): VolumeMount {
  const [volume, path, mode, ...rest] = text.split(':');
  if (!volume || !path || rest.length > 0 || (mode !== undefined && mode !== 'ro' && mode !== 'rw')) throw new Error(`--volume ${text}: NAME:PATH, or NAME:PATH:ro`);
  return { volume, path, ...(mode === 'ro' && { read_only: true }) };
}

interface SyncFlags {
  volume?: boolean;
  include: string[];
  exclude: string[];
  maxBytes?: number;
  maxFiles?: number;
  timeout?: number;
}

/**
 * `agent-runner sandbox create|list|exec|put|get|kill`: long-lived sandboxes on a running
 * service (`agent-runner serve`), as `agent-runner session` does sessions. Each prints the
 * service's answer as JSON (`get` prints the file's bytes); a refusal prints `{"error": ...}`
 * and exits 1, as does a command whose exit_code is not 0.
 */
export function registerSandbox(program: Command): void {
  const sandbox = program
    .command('sandbox')
    .description('long-lived sandboxes on an agent-runner service: run until killed or timed out, with commands and files (the same sandboxes E2B’s SDK reaches)')
    .addHelpText(
      'after',
      '\nExamples:\n  ID=$(agent-runner sandbox create --timeout 600 | jq -r .id)\n  agent-runner sandbox exec $ID --cmd "pip list | head"\n  agent-runner sandbox put $ID data.csv ./data.csv\n  agent-runner sandbox exec $ID -- wc -l data.csv\n  agent-runner sandbox get $ID data.csv -o copy.csv\n  agent-runner sandbox kill $ID',
    );

  withServer(sandbox.command('create').description('start a sandbox; prints it (its id is what the other commands take)'))
    .option('--template <name>', 'what it starts from (default base)')
    .option('--timeout <seconds>', 'kill it this long after it starts (default 300)')
    .option('-e, --env <KEY=VALUE>', 'environment of every process it runs (repeatable)', collect, [])
    .option('-m, --metadata <KEY=VALUE>', 'a label kept with it (repeatable)', collect, [])
    .option('--internet', 'let its processes reach the internet (if the server allows)')
    .option('-v, --volume <NAME:PATH[:ro]>', 'mount a volume (its name or id) at PATH, read-only with :ro (repeatable)', collect, [])
    .addOption(backendOption())
    .action((flags: ServerFlags & { template?: string; timeout?: string; env: string[]; metadata: string[]; internet?: boolean; backend?: string; volume: string[] }) =>
      answer(flags, (client) => {
        const timeout = positiveOption('--timeout', flags.timeout, { integer: true });
        const envVars = pairsOption('--env', flags.env);
        const metadata = pairsOption('--metadata', flags.metadata);
        const request: SandboxCreateRequest = {
          ...(flags.template ? { template: flags.template } : {}),
          ...(timeout === undefined ? {} : { timeout_seconds: timeout }),
          ...(Object.keys(envVars).length ? { env_vars: envVars } : {}),
          ...(Object.keys(metadata).length ? { metadata } : {}),
          ...(flags.internet ? { allow_internet_access: true } : {}),
          ...(flags.backend ? { backend: { kind: flags.backend as never } } : {}),
          ...(flags.volume.length ? { volume_mounts: flags.volume.map(volumeMount) } : {}),
        };
        return client.createSandbox(request);
      }),
    );

  withServer(
    sandbox
      .command('exec')
      .description('run a command (after --) or a shell line (--cmd) to its end in the sandbox; prints the result and exits 0 when its exit_code is 0, 1 otherwise'),
  )
    .argument('<id>', 'the sandbox')
    .argument('[argv...]', 'a command and its arguments, after --')
    .option('-c, --cmd <line>', 'a command line, run by /bin/bash -l -c')
    .option('-t, --timeout <seconds>', 'seconds it may run; past it its whole process tree is killed (exit_code 124)')
    .option('--cwd <dir>', 'where it runs (default /home/user)')
    .addOption(new Option('-u, --user <name>', "whom it runs as: the sandbox's user, or root where the backend has one").choices(USERS))
    .option('-e, --env <KEY=VALUE>', 'environment addition (repeatable)', collect, [])
    .addOption(new Option('-i, --stdin <file>', 'its standard input, from a file (- for this command’s stdin)'))
    .action((id: string, argv: string[], flags: ServerFlags & { cmd?: string; timeout?: string; cwd?: string; user?: AgentUser; env: string[]; stdin?: string }) =>
      answer(flags, async (client) => {
        if ((flags.cmd === undefined) === (argv.length === 0)) throw new Error('give a command after -- or a shell line with --cmd, not both');
        const timeout = positiveOption('--timeout', flags.timeout, { integer: false });
        const envs = pairsOption('--env', flags.env);
        const stdin = flags.stdin === undefined ? undefined : flags.stdin === '-' ? await readStdin() : await readFile(flags.stdin, 'utf8');
        const common = {
          ...(timeout === undefined ? {} : { timeout }),
          ...(flags.cwd ? { cwd: flags.cwd } : {}),
          ...(flags.user ? { user: flags.user } : {}),
          ...(Object.keys(envs).length ? { envs } : {}),
          ...(stdin === undefined ? {} : { stdin }),
        };
        const request: SandboxExecRequest = flags.cmd === undefined ? { argv, ...common } : { cmd: flags.cmd, ...common };
        return client.sandboxExec(id, request);
      }),
    );

  withServer(sandbox.command('put').description('write a file into the sandbox from a local file (or stdin); prints its path and size'))
    .argument('<id>', 'the sandbox')
    .argument('<path>', 'the path in the sandbox: absolute, or relative to /home/user')
    .argument('[local]', 'the local file (default: stdin)')
    .action((id: string, path: string, local: string | undefined, flags: ServerFlags) =>
      answer(flags, async (client) => client.sandboxWriteFile(id, path, await localBytes(local))),
    );

  withServer(sandbox.command('get').description('print a file of the sandbox (or write it with --output)'))
    .argument('<id>', 'the sandbox')
    .argument('<path>', 'the path in the sandbox: absolute, or relative to /home/user')
    .option('-o, --output <file>', 'write the bytes here instead of stdout')
    .action((id: string, path: string, flags: ServerFlags & { output?: string }) =>
      answer(flags, async (client) => deliverFile(path, await client.sandboxReadFile(id, path), flags.output)),
    );

  for (const direction of ['push', 'pull'] as const) {
    const [from, to] = direction === 'push' ? ['<local>', '<target>'] : ['<target>', '<local>'];
    withServer(
      sandbox
        .command(direction)
        .description(
          direction === 'push'
            ? 'sync a local directory into a sandbox (ID:PATH) or a volume (--volume, NAME:PATH) as one tar stream; prints what was moved'
            : 'sync a directory of a sandbox (ID:PATH) or a volume (--volume, NAME:PATH) into a local one as one tar stream; prints what was moved',
        ),
    )
      .argument(from, direction === 'push' ? 'the local directory' : 'ID:PATH, the path absolute or relative to /home/user')
      .argument(to, direction === 'push' ? 'ID:PATH, the path absolute or relative to /home/user' : 'the local directory (made if missing)')
      .option('--volume', 'ID names a volume (its id or name), not a sandbox')
      .option('--include <glob>', 'only paths matching (repeatable)', collect, [])
      .option('--exclude <glob>', 'leave out paths matching (repeatable)', collect, [])
      .option('--max-bytes <n>', 'stop past this many bytes of file content', (text) => positiveOption('--max-bytes', text, { integer: true }))
      .option('--max-files <n>', 'stop past this many entries', (text) => positiveOption('--max-files', text, { integer: true }))
      .option('--timeout <seconds>', 'stop past this long', (text) => positiveOption('--timeout', text, { integer: false }))
      .action((first: string, second: string, flags: ServerFlags & SyncFlags) =>
        answer(flags, async (client) => {
          const [local, remote] = direction === 'push' ? [first, second] : [second, first];
          const split = remote.indexOf(':');
          if (split <= 0) throw new Error(`${remote}: the target is ID:PATH`);
          const id = remote.slice(0, split);
          const target = flags.volume ? { volume: id } : { sandbox: id };
          const query = {
            path: remote.slice(split + 1) || '.',
            include: flags.include,
            exclude: flags.exclude,
            ...(flags.maxBytes !== undefined && { max_bytes: flags.maxBytes }),
            ...(flags.maxFiles !== undefined && { max_files: flags.maxFiles }),
            ...(flags.timeout !== undefined && { timeout: flags.timeout }),
          };
          const { packTree, unpackTree } = await import('../../client/tree-transfer.js');
          let report;
          if (direction === 'push') report = await client.syncIn(target, packTree(local), query);
          else {
            const received = await client.syncOut(target, query);
            await unpackTree(received.tar, local);
            report = await received.report;
          }
          return { ...report, exit_code: report.complete ? 0 : 1 };
        }),
      );
  }

  withServer(sandbox.command('kill').description('kill a sandbox; prints its final state'))
    .argument('<id>', 'the sandbox')
    .action((id: string, flags: ServerFlags) => answer(flags, (client) => client.killSandbox(id)));

  withServer(sandbox.command('list').description('the sandboxes on the service, running, paused and recently ended')).action((flags: ServerFlags) =>
    answer(flags, async (client) => ({ sandboxes: await client.listSandboxes() })),
  );

  withServer(sandbox.command('pause').description('pause a sandbox: its files kept (its memory too where the backend can), nothing of it left running; prints it'))
    .argument('<id>', 'the sandbox')
    .option('--memory', 'require its processes and memory to be kept (refused where the backend keeps files only)')
    .option('--no-memory', 'keep its files only, its processes ending, even where the backend keeps memory')
    .action((id: string, flags: ServerFlags & { memory?: boolean }) =>
      answer(flags, (client) => client.pauseSandbox(id, flags.memory === undefined ? {} : { keep_memory: flags.memory })),
    );

  withServer(sandbox.command('resume').description('resume a paused sandbox under its id; prints it'))
    .argument('<id>', 'the sandbox')
    .option('-t, --timeout <seconds>', 'its timeout from now once resumed')
    .action((id: string, flags: ServerFlags & { timeout?: string }) =>
      answer(flags, (client) => client.resumeSandbox(id, positiveOption('--timeout', flags.timeout, { integer: true }))),
    );

  withServer(sandbox.command('fork').description("copies of a running sandbox, each a sandbox of its own with the parent's state; prints each"))
    .argument('<id>', 'the sandbox')
    .option('-n, --count <n>', 'how many copies', '1')
    .option('-t, --timeout <seconds>', "each copy's timeout")
    .action((id: string, flags: ServerFlags & { count: string; timeout?: string }) =>
      answer(flags, (client) => {
        const timeout = positiveOption('--timeout', flags.timeout, { integer: true });
        return client.forkSandbox(id, { count: positiveOption('--count', flags.count, { integer: true })!, ...(timeout === undefined ? {} : { timeout_seconds: timeout }) });
      }),
    );

  withServer(sandbox.command('snapshot').description("keep a running sandbox's state as a snapshot, a template new sandboxes start from; prints it"))
    .argument('<id>', 'the sandbox')
    .option('--name <name>', 'a name to start sandboxes from it by (`sandbox create --template <name>`)')
    .action((id: string, flags: ServerFlags & { name?: string }) => answer(flags, (client) => client.snapshotSandbox(id, flags.name === undefined ? {} : { name: flags.name })));

  withServer(sandbox.command('snapshots').description('the snapshots the service keeps')).action((flags: ServerFlags) =>
    answer(flags, async (client) => ({ snapshots: await client.listSnapshots() })),
  );

  withServer(sandbox.command('delete-snapshot').description('delete a snapshot, by id or name'))
    .argument('<snapshot>', 'its id or name')
    .action((snapshot: string, flags: ServerFlags) => answer(flags, (client) => client.deleteSnapshot(snapshot)));
}
