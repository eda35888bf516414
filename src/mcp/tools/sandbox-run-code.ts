import { Type } from '@sinclair/typebox';
import { SandboxRunCodeRequestSchema, SandboxRunCodeResultSchema } from '../../contract/sandbox.js';
import { sandboxRunCodeText } from '../result-text.js';
import { imagesOf, type Tool } from '../tool.js';
import { SandboxIdField } from './sandbox-id.js';

const SandboxRunCodeInput = Type.Object({ sandbox_id: SandboxIdField, ...SandboxRunCodeRequestSchema.properties }, { additionalProperties: false });

export const sandboxRunCodeTool: Tool<typeof SandboxRunCodeInput> = {
  name: 'sandbox_run_code',
  title: 'Run python in a sandbox, with charts and tables',
  description: [
    'Run a python cell in the code interpreter of a sandbox made by sandbox_create (a Jupyter kernel: variables, imports and files persist between calls; `!` shell lines and `%` magics work).',
    'numpy, pandas and matplotlib are installed. A matplotlib figure shown or left open comes back as an image you can see, with its data as a chart (type, labels, points or values); a DataFrame comes back as a table.',
    'timeout is in seconds (default 10): past it the cell is interrupted and the variables are kept. Answers with stdout, stderr, the results in order (the last expression is the main one) and the error with its traceback.',
  ].join(' '),
  input: SandboxRunCodeInput,
  output: SandboxRunCodeResultSchema,
  annotations: { title: 'Run python in a sandbox', readOnlyHint: false, destructiveHint: false, openWorldHint: false },
  async call({ sandbox_id, ...request }, { sandboxes }) {
    const result = await sandboxes.runCode(sandbox_id, request);
    return { result, text: sandboxRunCodeText(result), images: imagesOf(result.results) };
  },
};
