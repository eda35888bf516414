import { readFile, writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { AgentRunnerClient } from '../client/client.js';
import { exitAfterFlush, printJson, readStdinBytes } from '../util/stdio.js';

/** How a command that calls a running service finds it. */
export interface ServerFlags {
  server?: string;
  token?: string;
}

/** `--server` and `--token` on a command that calls a running service. */
export function withServer(command: Command): Command {
  return command
    .option('--server <url>', 'the service (or AGENT_RUNNER_URL; default http://127.0.0.1:3000)')
    .option('--token <token>', "the service's token (or AGENT_RUNNER_TOKEN)");
}

/**
 * Calls the service; prints its answer as JSON (null: already written) or its refusal as
 * `{"error": ...}`, and exits: 1 for a refusal or an answer whose `exit_code` is not 0.
 */
export async function answer(flags: ServerFlags, call: (client: AgentRunnerClient) => Promise<unknown>): Promise<void> {
  const url = flags.server ?? process.env.AGENT_RUNNER_URL ?? 'http://127.0.0.1:3000';
  const token = flags.token ?? process.env.AGENT_RUNNER_TOKEN;
  const [{ AgentRunnerClient }, { AgentRunnerError }] = await Promise.all([import('../client/client.js'), import('../client/types.js')]);
  const client = new AgentRunnerClient({ url, ...(token ? { token } : {}) });
  try {
    const result = await call(client);
    if (result !== null) printJson(result);
    const exitCode = result !== null && typeof result === 'object' && 'exit_code' in result ? (result as { exit_code: number }).exit_code : 0;
    exitAfterFlush(exitCode === 0 ? 0 : 1);
  } catch (error) {
    if (!(error instanceof AgentRunnerError)) throw error;
    printJson({ error: { code: error.code, message: error.reason, ...(error.details === undefined ? {} : { details: error.details }) } });
    exitAfterFlush(1);
  }
}

/** The bytes to send: a local file, or stdin for none or `-`. */
export async function localBytes(local: string | undefined): Promise<Buffer> {
  return local === undefined || local === '-' ? readStdinBytes() : readFile(local);
}

/** A file fetched from the service: its bytes on stdout (null: nothing more to print), or written to `output` and described. */
export async function deliverFile(path: string, content: Buffer, output: string | undefined): Promise<object | null> {
  if (output === undefined) {
    process.stdout.write(content);
    return null;
  }
  await writeFile(output, content);
  return { path, bytes: content.length, written_to: output };
}
