import { Type } from '@sinclair/typebox';
import { SandboxPauseRequestSchema, SandboxSchema } from '../../contract/sandbox.js';
import type { Tool } from '../tool.js';
import { SandboxIdField } from './sandbox-id.js';

const SandboxPauseInput = Type.Object({ sandbox_id: SandboxIdField, ...SandboxPauseRequestSchema.properties }, { additionalProperties: false });

export const sandboxPauseTool: Tool<typeof SandboxPauseInput> = {
  name: 'sandbox_pause',
  title: 'Pause a sandbox',
  description:
    'Pause a sandbox: its files are kept (its running processes too where its backend keeps memory; `kept` says which) and nothing of it runs until sandbox_resume. Answers with the paused sandbox.',
  input: SandboxPauseInput,
  output: SandboxSchema,
  annotations: { title: 'Pause a sandbox', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  async call({ sandbox_id, keep_memory }, { sandboxes }) {
    const sandbox = await sandboxes.pause(sandbox_id, keep_memory === undefined ? {} : { keep_memory });
    return { result: sandbox, text: `sandbox ${sandbox.id} paused (kept: ${sandbox.kept})` };
  },
};
