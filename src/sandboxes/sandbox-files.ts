import { CodedError, contractError, type ErrorCode } from '../contract/errors.js';
import type { AgentErrorCode } from '../contract/sandbox-agent.js';
import type { SandboxFileWritten } from '../contract/sandbox.js';
import { AgentOperationError, type SandboxAgentPort } from './agent-port.js';

/** Bytes per agent read or write: a frame stays small, whatever the file's size. */
const CHUNK_BYTES = 1024 * 1024;

/** Each agent failure on a file, as /v1/sandboxes answers it. */
const FILE_ERROR_OF: Record<AgentErrorCode, ErrorCode> = {
  not_found: 'sandbox.file_not_found',
  is_a_directory: 'sandbox.file_not_regular',
  not_regular: 'sandbox.file_not_regular',
  permission_denied: 'sandbox.file_denied',
  // A name over 255 bytes, a loop of links...: the message says which.
  invalid: 'sandbox.file_failed',
  no_space: 'sandbox.file_failed',
  not_a_directory: 'sandbox.file_failed',
  exists: 'sandbox.file_failed',
  no_such_process: 'sandbox.file_failed',
  refused: 'sandbox.file_failed',
  too_large: 'sandbox.file_failed',
  path_escape: 'validation.path_escape',
  busy: 'sandbox.busy',
  failed: 'sandbox.file_failed',
};

/**
 * A regular file of a sandbox, read through its agent a chunk at a time; over `maxBytes` it is
 * refused (sandbox.file_too_large) once that many have been read, not after all of it.
 * `path` is absolute or relative to the sandbox user's home, resolved as the user would; or,
 * with `beneath`, relative to that directory and never leading out of it, links included
 * (validation.path_escape): the agent resolves it inside the sandbox.
 */
export async function readSandboxFile(agent: SandboxAgentPort, path: string, maxBytes: number, beneath?: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    const chunk = await fileCall(path, () =>
      agent.request({ op: 'read', path, offset: total, length: Math.min(CHUNK_BYTES, maxBytes + 1 - total), ...(beneath === undefined ? {} : { beneath }) }),
    );
    const { data } = chunk;
    chunks.push(data);
    total += data.length;
    if (total > maxBytes) throw tooLarge(path, maxBytes);
    if (chunk.eof || data.length === 0) return Buffer.concat(chunks, total);
  }
}

/**
 * Writes `content` to `path` (parents made, a file there replaced; with `append`, added to its
 * end) in chunks, the first truncating unless appending and the rest appending; `path` and
 * `beneath` as readSandboxFile's.
 */
export async function writeSandboxFile(
  agent: SandboxAgentPort,
  path: string,
  content: Buffer,
  maxBytes: number,
  { append = false, beneath }: { append?: boolean; beneath?: string } = {},
): Promise<SandboxFileWritten> {
  if (content.length > maxBytes) throw tooLarge(path, maxBytes);
  let written = 0;
  let entryPath: string;
  do {
    const data = content.subarray(written, written + CHUNK_BYTES);
    ({
      entry: { path: entryPath },
    } = await fileCall(path, () => agent.request({ op: 'write', path, data, append: append || written > 0, ...(beneath === undefined ? {} : { beneath }) })));
    written += data.length;
  } while (written < content.length);
  return { path: entryPath, bytes: content.length };
}

async function fileCall<T>(path: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (!(error instanceof AgentOperationError)) throw error;
    throw new CodedError(contractError(FILE_ERROR_OF[error.code], `${path}: ${error.message}`, { path }));
  }
}

function tooLarge(path: string, maxBytes: number): CodedError {
  return new CodedError(
    contractError('sandbox.file_too_large', `${path} is over ${maxBytes} bytes, the largest file this server moves in or out of a sandbox`, { path, limit: maxBytes }),
  );
}
