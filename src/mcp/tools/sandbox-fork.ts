import { Type } from '@sinclair/typebox';
import { SandboxForkResultSchema } from '../../contract/sandbox.js';
import type { Tool } from '../tool.js';
import { SandboxIdField } from './sandbox-id.js';

const SandboxForkInput = Type.Object(
  { sandbox_id: SandboxIdField, count: Type.Optional(Type.Integer({ minimum: 1, maximum: 10, description: 'How many copies (default 1).' })) },
  { additionalProperties: false },
);

export const sandboxForkTool: Tool<typeof SandboxForkInput> = {
  name: 'sandbox_fork',
  title: 'Fork a sandbox',
  description:
    "Copies of a running sandbox, each a sandbox of its own (own id) starting from the parent's state: to try several approaches from one point. The parent keeps running; a copy's changes never reach it or the other copies.",
  input: SandboxForkInput,
  output: SandboxForkResultSchema,
  annotations: { title: 'Fork a sandbox', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  async call({ sandbox_id, count }, { sandboxes }) {
    const result = await sandboxes.fork(sandbox_id, count === undefined ? {} : { count });
    const lines = result.forks.map((fork) => (fork.sandbox ? `copy ${fork.sandbox.id}` : `failed: ${fork.error?.message}`));
    return { result, text: lines.join('\n') };
  },
};
