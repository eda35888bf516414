import { Type } from '@sinclair/typebox';
import { SandboxSchema } from '../../contract/sandbox.js';
import type { Tool } from '../tool.js';
import { SandboxIdField } from './sandbox-id.js';

const SandboxKillInput = Type.Object({ sandbox_id: SandboxIdField }, { additionalProperties: false });

export const sandboxKillTool: Tool<typeof SandboxKillInput> = {
  name: 'sandbox_kill',
  title: 'Kill a sandbox',
  description: 'Kill a sandbox made by sandbox_create: its processes and files are gone. Answers with the sandbox in its final state.',
  input: SandboxKillInput,
  output: SandboxSchema,
  annotations: { title: 'Kill a sandbox', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  async call({ sandbox_id }, { sandboxes }) {
    const sandbox = await sandboxes.kill(sandbox_id);
    return { result: sandbox, text: `sandbox ${sandbox.id} ended (${sandbox.ended_reason ?? 'killed'})` };
  },
};
