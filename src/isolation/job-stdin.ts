import { Readable, type Writable } from 'node:stream';
import type { SandboxIO } from './types.js';

/**
 * Gives the job its stdin: bytes known up front are written and the pipe closed; a stream is
 * piped as it comes (a session's requests), the pipe closing when the stream ends.
 */
export function feedStdin(pipe: Writable, stdin: SandboxIO['stdin']): void {
  if (stdin instanceof Readable) stdin.pipe(pipe);
  else pipe.end(stdin);
}
