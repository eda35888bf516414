import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TEST_STATE_DIR } from './runtime.js';

const CLI = fileURLToPath(new URL('../../dist/cli/agent-runner.js', import.meta.url));

export interface ServerProcess {
  url: string;
  storeDir: string;
  child: ChildProcess;
  logs: string[];
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** Starts the real `agent-runner serve` on a free port and waits until it listens. */
export async function startServer(args: string[] = [], options: { storeDir?: string; env?: NodeJS.ProcessEnv } = {}): Promise<ServerProcess> {
  const storeDir = options.storeDir ?? mkdtempSync(join(tmpdir(), 'store-'));
  const child = spawn(process.execPath, [CLI, 'serve', '--addr', '127.0.0.1:0', '--store-dir', storeDir, ...args], {
    env: { ...process.env, AGENT_RUNNER_STATE_DIR: TEST_STATE_DIR, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    let buffered = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      let newline;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        logs.push(line);
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === 'agent-runner serving' && entry.url) resolve(entry.url);
      }
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    void exited.then((code) => reject(new Error(`server exited ${code} before listening: ${stderr}`)));
  });
  return {
    url,
    storeDir,
    child,
    logs,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

export async function api(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, json, text };
}
