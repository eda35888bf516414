import { Type } from '@sinclair/typebox';
import { SandboxListResultSchema } from '../../contract/mcp.js';
import type { Tool } from '../tool.js';

const SandboxListInput = Type.Object({}, { additionalProperties: false });

export const sandboxListTool: Tool<typeof SandboxListInput> = {
  name: 'sandbox_list',
  title: 'List sandboxes',
  description: 'The sandboxes made through this server, running and recently ended, with their ids, states and when they end.',
  input: SandboxListInput,
  output: SandboxListResultSchema,
  annotations: { title: 'List sandboxes', readOnlyHint: true, openWorldHint: false },
  async call(_input, { sandboxes }) {
    const listed = await sandboxes.list();
    const lines = listed.map((sandbox) => `${sandbox.id} ${sandbox.state} until ${sandbox.end_at}`);
    return { result: { sandboxes: listed }, text: lines.length > 0 ? lines.join('\n') : 'no sandboxes' };
  },
};
