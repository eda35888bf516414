import { Type } from '@sinclair/typebox';
import { SandboxSchema } from '../../contract/sandbox.js';
import type { Tool } from '../tool.js';
import { SandboxIdField } from './sandbox-id.js';

const SandboxResumeInput = Type.Object({ sandbox_id: SandboxIdField }, { additionalProperties: false });

export const sandboxResumeTool: Tool<typeof SandboxResumeInput> = {
  name: 'sandbox_resume',
  title: 'Resume a sandbox',
  description: 'Resume a sandbox paused by sandbox_pause, under the same id, with what its pause kept. A running sandbox is answered as it is.',
  input: SandboxResumeInput,
  output: SandboxSchema,
  annotations: { title: 'Resume a sandbox', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async call({ sandbox_id }, { sandboxes }) {
    const { sandbox, resumed } = await sandboxes.resume(sandbox_id);
    return { result: sandbox, text: `sandbox ${sandbox.id} ${resumed ? 'resumed' : 'was running'} until ${sandbox.end_at}` };
  },
};
