import { spawn } from 'node:child_process';
import { installedEsbuild } from '../languages/typescript.js';
import { forkWhenQuiet } from '../util/fork-gate.js';

/** The longest a cell's transpile may take: esbuild does megabytes in well under a second. */
const TRANSPILE_TIMEOUT_MS = 30_000;
/** What is kept of esbuild's messages about a cell that does not parse. */
const MAX_MESSAGE_BYTES = 64 * 1024;

/** A typescript cell as javascript, or why it is not one (a syntax error: the cell's error line). */
export type TranspiledCell = { code: string } | { error: { name: string; value: string; traceback: string } };

/**
 * The esbuild binary of this package's node_modules (the one the `typescript` language uses), or
 * null when it is not installed.
 */
export function esbuildExecutable(): string | null {
  return installedEsbuild()[0] ?? null;
}

/**
 * A typescript context's cell stripped of its types, on the host, by esbuild's native binary (a
 * parser and printer: it runs nothing of the cell) in a process of its own, so a large cell holds
 * no event loop. The javascript it prints runs in the context's node kernel as any cell does, its
 * imports and top-level await kept for the kernel. Types are stripped, not checked, as node's
 * --experimental-strip-types and E2B's kernel do. Doing it here rather than in the sandbox keeps
 * a transpiler out of every sandbox and backend (a microVM has no node_modules).
 */
export async function transpileCell(executable: string, code: string): Promise<TranspiledCell> {
  const child = await forkWhenQuiet(() =>
    spawn(executable, ['--loader=ts', '--sourcefile=<cell>', '--log-level=error', '--color=false'], {
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: TRANSPILE_TIMEOUT_MS,
    }),
  );
  return new Promise((resolve, reject) => {
    const stdout: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < MAX_MESSAGE_BYTES) stderr += chunk.toString('utf8');
    });
    child.on('error', (error) => reject(new Error(`esbuild did not run: ${error.message}`)));
    child.on('close', (status, signal) => {
      if (status === 0) return resolve({ code: Buffer.concat(stdout).toString('utf8') });
      if (signal !== null) return reject(new Error(`esbuild ended by ${signal} transpiling the cell`));
      const message = stderr.trim();
      const first = /\[ERROR\] (.*)/.exec(message)?.[1] ?? message.split('\n')[0] ?? 'the cell does not parse';
      resolve({ error: { name: 'SyntaxError', value: first, traceback: message } });
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(code);
  });
}
