import { ListRuntimesInputSchema, ListRuntimesResultSchema } from '../../contract/mcp.js';
import type { Tool } from '../tool.js';

export const listRuntimesTool: Tool<typeof ListRuntimesInputSchema> = {
  name: 'list_runtimes',
  title: 'List the languages',
  description:
    'List the languages run_snippet can run here, each with its installed version and the other names its lang accepts. Only languages whose toolchain is present are listed.',
  input: ListRuntimesInputSchema,
  output: ListRuntimesResultSchema,
  annotations: { title: 'List the languages', readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  async call(_input, { runtime }) {
    const runtimes = await runtime.toolchains.runtimes();
    const lines = runtimes.map(({ language, version, aliases }) => `${language} ${version}${aliases.length > 0 ? ` (also: ${aliases.join(', ')})` : ''}`);
    return { result: { runtimes }, text: lines.join('\n') || 'no language is available here' };
  },
};
