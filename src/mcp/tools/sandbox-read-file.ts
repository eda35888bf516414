import { Type } from '@sinclair/typebox';
import { FileEncodingSchema, SandboxFileContentSchema, type SandboxFileContent } from '../../contract/mcp.js';
import type { Tool } from '../tool.js';
import { SandboxIdField } from './sandbox-id.js';

const SandboxReadFileInput = Type.Object(
  {
    sandbox_id: SandboxIdField,
    path: Type.String({ minLength: 1, maxLength: 4096, description: 'Absolute, or relative to /home/user.' }),
    encoding: Type.Optional(FileEncodingSchema),
  },
  { additionalProperties: false },
);

export const sandboxReadFileTool: Tool<typeof SandboxReadFileInput> = {
  name: 'sandbox_read_file',
  title: 'Read a file of a sandbox',
  description:
    'Read a regular file of a sandbox made by sandbox_create: its text (encoding "utf8", the default; bytes that are not UTF-8 come out replaced), or its bytes in base64 with encoding "base64".',
  input: SandboxReadFileInput,
  output: SandboxFileContentSchema,
  annotations: { title: 'Read a file of a sandbox', readOnlyHint: true, openWorldHint: false },
  async call({ sandbox_id, path, encoding = 'utf8' }, { sandboxes }) {
    const bytes = await sandboxes.readFile(sandbox_id, path);
    const result: SandboxFileContent = { path, encoding, content: bytes.toString(encoding), bytes: bytes.length };
    return { result, text: encoding === 'utf8' ? result.content : `${bytes.length} bytes of ${path}, in base64:\n${result.content}` };
  },
};
