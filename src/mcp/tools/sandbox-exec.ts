import { Type } from '@sinclair/typebox';
import { CodedError, contractError } from '../../contract/errors.js';
import { SandboxArgvExecSchema, SandboxExecResultSchema, SandboxShellExecSchema } from '../../contract/sandbox.js';
import { sandboxExecText } from '../result-text.js';
import type { Tool } from '../tool.js';
import { SandboxIdField } from './sandbox-id.js';

/** MCP wants one object schema: argv's and cmd's fields side by side, one of the two given. */
const SandboxExecInput = Type.Object(
  { sandbox_id: SandboxIdField, ...Type.Partial(SandboxArgvExecSchema).properties, ...Type.Partial(SandboxShellExecSchema).properties },
  { additionalProperties: false },
);

export const sandboxExecTool: Tool<typeof SandboxExecInput> = {
  name: 'sandbox_exec',
  title: 'Run a command in a sandbox',
  description: [
    'Run a command to its end in a sandbox made by sandbox_create: cmd is a bash command line (pipes, &&, globs), argv a program and its arguments run as they are.',
    'It runs in /home/user unless cwd says otherwise, with optional envs and stdin. timeout is in seconds (default 10): past it the command and everything it started are killed, exit_code 124 and timed_out true.',
    'Answers with exit_code, stdout and stderr (long output is cut, with a note).',
  ].join(' '),
  input: SandboxExecInput,
  output: SandboxExecResultSchema,
  annotations: { title: 'Run a command in a sandbox', readOnlyHint: false, destructiveHint: false, openWorldHint: false },
  async call({ sandbox_id, argv, cmd, ...common }, { sandboxes }) {
    if ((argv === undefined) === (cmd === undefined))
      throw new CodedError(contractError('validation.invalid_request', 'give exactly one of cmd (a bash command line) or argv (a program and its arguments)', { field: 'cmd' }));
    const result = await sandboxes.exec(sandbox_id, argv === undefined ? { cmd: cmd!, ...common } : { argv, ...common });
    return { result, text: sandboxExecText(result) };
  },
};
