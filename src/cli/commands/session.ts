import { readFile } from 'node:fs/promises';
import { Option, type Command } from 'commander';
import type { SessionCreateRequest, SessionExecRequest } from '../../contract/session.js';
import { readStdin } from '../../util/stdio.js';
import { backendOption } from '../backend-option.js';
import { positiveOption } from '../flag-values.js';
import { answer, deliverFile, localBytes, withServer, type ServerFlags } from '../server-call.js';

/**
 * `agent-runner session create|exec|put|get|rm|list`: sessions on a running service (a session
 * outlives each command, so it lives in `agent-runner serve`). Each prints the service's answer
 * as JSON (`get` prints the file's bytes); a refusal prints `{"error": ...}` and exits 1.
 */
export function registerSession(program: Command): void {
  const session = program
    .command('session')
    .description('sessions on an agent-runner service: a sandbox that lives across calls, with a live python or node interpreter')
    .addHelpText(
      'after',
      '\nExamples:\n  ID=$(agent-runner session create --lang python | jq -r .id)\n  agent-runner session exec $ID --code "x = 41"\n  agent-runner session exec $ID --code "print(x + 1)"\n  agent-runner session put $ID data.csv ./data.csv\n  agent-runner session exec $ID -- ls -l\n  agent-runner session rm $ID',
    );
  withServer(session.command('create').description('start a session; prints it (its id is what the other commands take)'))
    .option('-l, --lang <lang>', 'python or node: the live interpreter cells run in (omitted: commands and files only)')
    .option('--idle-timeout <seconds>', 'end the session after this long without a request')
    .option('--memory-mb <n>', "the whole session's memory")
    .option('--network <policy>', 'none (default) or allow')
    .addOption(backendOption())
    .action((flags: ServerFlags & { lang?: string; idleTimeout?: string; memoryMb?: string; network?: string; backend?: string }) =>
      answer(flags, (client) => {
        const idle = positiveOption('--idle-timeout', flags.idleTimeout, { integer: true });
        const memoryMb = positiveOption('--memory-mb', flags.memoryMb, { integer: true });
        const request: SessionCreateRequest = {
          ...(flags.lang ? { lang: flags.lang } : {}),
          ...(flags.backend ? { backend: { kind: flags.backend as never } } : {}),
          ...(idle === undefined ? {} : { idle_timeout_seconds: idle }),
          ...(memoryMb === undefined ? {} : { limits: { memory_bytes: memoryMb * 1024 * 1024 } }),
          ...(flags.network ? { network: flags.network as 'none' | 'allow' } : {}),
        };
        return client.createSession(request);
      }),
    );

  withServer(
    session.command('exec').description('run a cell (--code, --file) or, after --, a command in its work dir; prints the result and exits 0 when its exit_code is 0, 1 otherwise'),
  )
    .argument('<id>', 'the session')
    .argument('[argv...]', 'a command and its arguments, after --')
    .option('-c, --code <code>', 'a cell, run in the session’s interpreter')
    .addOption(new Option('-f, --file <path>', 'read the cell from a file (- for stdin)').conflicts('code'))
    .option('-t, --timeout <seconds>', 'seconds the cell or command may run')
    .action((id: string, argv: string[], flags: ServerFlags & { code?: string; file?: string; timeout?: string }) =>
      answer(flags, async (client) => {
        const timeout = positiveOption('--timeout', flags.timeout, { integer: false });
        const common = timeout === undefined ? {} : { timeout };
        const code = flags.code ?? (flags.file === undefined ? undefined : flags.file === '-' ? await readStdin() : await readFile(flags.file, 'utf8'));
        if ((code === undefined) === (argv.length === 0)) throw new Error('give a cell (--code or --file) or a command after --, not both');
        const request: SessionExecRequest = code === undefined ? { argv, ...common } : { code, ...common };
        return client.sessionExec(id, request);
      }),
    );

  withServer(session.command('put').description('write a file into the session’s work dir from a local file (or stdin); prints its size and sha256'))
    .argument('<id>', 'the session')
    .argument('<path>', 'the path in the work dir')
    .argument('[local]', 'the local file (default: stdin)')
    .action((id: string, path: string, local: string | undefined, flags: ServerFlags) => answer(flags, async (client) => client.putSessionFile(id, path, await localBytes(local))));

  withServer(session.command('get').description('print a file of the session’s work dir (or write it with --output)'))
    .argument('<id>', 'the session')
    .argument('<path>', 'the path in the work dir')
    .option('-o, --output <file>', 'write the bytes here instead of stdout')
    .action((id: string, path: string, flags: ServerFlags & { output?: string }) =>
      answer(flags, async (client) => deliverFile(path, await client.getSessionFile(id, path), flags.output)),
    );

  withServer(session.command('rm').description('end a session; prints its final state'))
    .argument('<id>', 'the session')
    .action((id: string, flags: ServerFlags) => answer(flags, (client) => client.endSession(id)));

  withServer(session.command('list').description('the sessions on the service, live and recently ended')).action((flags: ServerFlags) =>
    answer(flags, async (client) => ({ sessions: await client.sessions() })),
  );
}
