import { Type } from '@sinclair/typebox';
import { FileEncodingSchema } from '../../contract/mcp.js';
import { SandboxFileWrittenSchema } from '../../contract/sandbox.js';
import type { Tool } from '../tool.js';
import { SandboxIdField } from './sandbox-id.js';

const SandboxWriteFileInput = Type.Object(
  {
    sandbox_id: SandboxIdField,
    path: Type.String({ minLength: 1, maxLength: 4096, description: 'Absolute, or relative to /home/user; missing parent directories are made.' }),
    content: Type.String({ description: 'The file’s text (or its bytes in base64 with encoding base64).' }),
    encoding: Type.Optional(FileEncodingSchema),
  },
  { additionalProperties: false },
);

export const sandboxWriteFileTool: Tool<typeof SandboxWriteFileInput> = {
  name: 'sandbox_write_file',
  title: 'Write a file into a sandbox',
  description:
    'Write a file into a sandbox made by sandbox_create, replacing what was there: text as it is, or binary content in base64 with encoding "base64". Answers with its absolute path and size.',
  input: SandboxWriteFileInput,
  output: SandboxFileWrittenSchema,
  annotations: { title: 'Write a file into a sandbox', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  async call({ sandbox_id, path, content, encoding }, { sandboxes }) {
    const written = await sandboxes.writeFile(sandbox_id, path, Buffer.from(content, encoding === 'base64' ? 'base64' : 'utf8'));
    return { result: written, text: `wrote ${written.bytes} bytes to ${written.path}` };
  },
};
