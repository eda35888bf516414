import { SandboxCreateRequestSchema, SandboxSchema } from '../../contract/sandbox.js';
import type { Tool } from '../tool.js';

export const sandboxCreateTool: Tool<typeof SandboxCreateRequestSchema> = {
  name: 'sandbox_create',
  title: 'Start a sandbox',
  description: [
    'Start a long-lived sandbox: a small Linux machine of its own (bash, python3, the host’s tools) whose files and background processes persist between sandbox_exec calls.',
    'Its home is /home/user. It is killed after timeout_seconds (default 300), by sandbox_kill, or when this server stops.',
    'Answers with the sandbox, whose id the other sandbox tools take.',
  ].join(' '),
  input: SandboxCreateRequestSchema,
  output: SandboxSchema,
  annotations: { title: 'Start a sandbox', readOnlyHint: false, destructiveHint: false, openWorldHint: false },
  async call(request, { sandboxes }) {
    const sandbox = await sandboxes.create(request);
    return { result: sandbox, text: `sandbox ${sandbox.id}: ${sandbox.template} on ${sandbox.backend}, until ${sandbox.end_at}` };
  },
};
