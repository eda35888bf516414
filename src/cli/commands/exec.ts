import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { Option, type Command } from 'commander';
import { LANGUAGE_NAMES } from '../../languages/language-names.js';
import { backendOption, withBackend } from '../backend-option.js';
import { withCommandRuntime } from '../command-config.js';
import { positiveOption } from '../flag-values.js';
import { cancelOnInterrupt } from '../interrupts.js';
import { exitAfterFlush, printJson, readStdin } from '../../util/stdio.js';

interface ExecFlags {
  lang?: string;
  code?: string;
  file?: string;
  timeout?: string;
  traceId?: string;
  guest?: string;
  guestToken?: string;
  listLanguages?: boolean;
  listBackends?: boolean;
  backend?: string;
  stdin?: boolean;
  arg: string[];
  addFile: string[];
  langVersion?: string;
  memoryMb?: string;
  outputBytes?: string;
}

const collect = (value: string, previous: string[]) => [...previous, value];

export function registerExec(program: Command): void {
  program
    .command('exec')
    .description('run one snippet in the sandbox: request JSON on stdin, or --lang with --code/--file; prints the response JSON')
    .option('-l, --lang <lang>', `language: ${LANGUAGE_NAMES}`)
    .option('-c, --code <code>', 'source code')
    .addOption(new Option('-f, --file <path>', 'read the source code from a file').conflicts('code'))
    .option('-t, --timeout <seconds>', 'seconds the program may run')
    .option('--trace-id <id>', 'trace id to echo')
    .option('--stdin', "pass this command's stdin to the program (with --code or --file)")
    .option('--arg <value>', 'a command-line argument of the program (repeatable)', collect, [])
    .option('--add-file <path>', 'put this file beside the source, under its own name (repeatable): modules the code imports, data it reads', collect, [])
    .option('--lang-version <version>', 'the language version wanted (a prefix matches; see --list-languages)')
    .option('--memory-mb <n>', "the program's memory, at most the configured snippet limit")
    .option('--output-bytes <n>', 'stdout and stderr each kept up to this many bytes')
    .option('--guest <address>', 'send the request to a guest runner (unix:/path or tcp:HOST:PORT) instead of running it here')
    .option('--guest-token <token>', "the guest runner's token (or AGENT_RUNNER_GUEST_TOKEN), sent first on the connection")
    .option('--list-languages', 'print the available languages with their toolchain versions')
    .option('--list-backends', 'print the default backend and how it enforces limits on this host (see `agent-runner backends` for every kind)')
    .addOption(backendOption())
    .addHelpText('after', "\nThe process exits with the snippet's exit_code (124 timeout, 127 unsupported language, 2 invalid request).")
    .action(async (flags: ExecFlags, command: Command) => {
      const { executeSnippet, invalidSnippetResponse } = await import('../../runner/snippet.js');
      if (flags.listLanguages) {
        printJson({ languages: await withCommandRuntime(command, (runtime) => runtime.toolchains.describe()) });
        return exitAfterFlush(0);
      }
      if (flags.listBackends) {
        printJson({ backends: [await withCommandRuntime(command, (runtime) => runtime.backend.status())] });
        return exitAfterFlush(0);
      }
      const request = await buildRequest(flags);
      const json = 'unparseable' in request ? null : withBackend(request.json, flags.backend);
      const response =
        'unparseable' in request
          ? invalidSnippetResponse(undefined, `stdin is not valid JSON: ${request.unparseable}`)
          : flags.guest
            ? await viaGuest(flags.guest, json, flags.guestToken ?? (process.env.AGENT_RUNNER_GUEST_TOKEN || undefined))
            : await withCommandRuntime(command, (runtime) => cancelOnInterrupt((signal) => executeSnippet(json, { runtime, signal })));
      printJson(response);
      exitAfterFlush(response.exit_code);
    });
}

async function buildRequest(flags: ExecFlags): Promise<{ json: unknown } | { unparseable: string }> {
  if (flags.lang === undefined && flags.code === undefined && flags.file === undefined) {
    const text = await readStdin();
    try {
      return { json: JSON.parse(text) };
    } catch (error) {
      return { unparseable: (error as Error).message };
    }
  }
  const code = flags.file !== undefined ? await readFile(flags.file, 'utf8') : flags.code;
  const files = await Promise.all(flags.addFile.map(async (path) => ({ name: basename(path), content: (await readFile(path)).toString('base64'), encoding: 'base64' })));
  const number = (flag: string, text: string | undefined) => positiveOption(flag, text, { integer: true });
  const timeout = positiveOption('--timeout', flags.timeout, { integer: false });
  const memoryMb = number('--memory-mb', flags.memoryMb);
  const outputBytes = number('--output-bytes', flags.outputBytes);
  return {
    json: {
      ...(flags.traceId !== undefined ? { trace_id: flags.traceId } : {}),
      lang: flags.lang,
      code,
      ...(timeout !== undefined ? { timeout } : {}),
      ...(flags.langVersion !== undefined ? { version: flags.langVersion } : {}),
      ...(flags.stdin ? { stdin: await readStdin() } : {}),
      ...(flags.arg.length > 0 ? { args: flags.arg } : {}),
      ...(files.length > 0 ? { files } : {}),
      ...(memoryMb ? { memory_bytes: memoryMb * 1024 * 1024 } : {}),
      ...(outputBytes ? { output_bytes: outputBytes } : {}),
    },
  };
}

async function viaGuest(address: string, request: unknown, token: string | undefined) {
  const [{ GuestClient }, { parseListenAddress }] = await Promise.all([import('../../guest/client.js'), import('../../guest/listen-address.js')]);
  const parsed = parseListenAddress(address);
  if (parsed.kind === 'vsock') throw new Error('--guest takes unix: or tcp: addresses (vsock is reached from the host through its own bridge)');
  const client = await GuestClient.connect(parsed, token === undefined ? {} : { token });
  try {
    return await client.request(request);
  } finally {
    client.close();
  }
}
