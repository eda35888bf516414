import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { processEnv } from './runtime.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const DIST = fileURLToPath(new URL('../../dist/cli/', import.meta.url));

/** Runs a built executable (npm test builds first) as a user would, with stdin if given. */
export function runCli(name: 'agent-runner' | 'agent-exec', args: string[], options: { stdin?: string; env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [`${DIST}${name}.js`, ...args], {
      env: processEnv(options.env),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(stdout).toString('utf8'), stderr: Buffer.concat(stderr).toString('utf8') }));
    child.stdin.end(options.stdin ?? '');
  });
}
