import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processEnv, TEST_STATE_DIR } from './runtime.js';
import { waitUntil } from './wait.js';
import { makeWorkspace } from './workspace.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from './timeouts.js';

const CLI = fileURLToPath(new URL('../../dist/cli/agent-runner.js', import.meta.url));

export interface ServerProcess {
  url: string;
  storeDir: string;
  /** The token the helper gave the server, which api() sends; null when the test chose its own auth. */
  token: string | null;
  child: ChildProcess;
  logs: string[];
  /** What the server wrote to stderr so far (a generated token is printed there). */
  stderr(): string;
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** Tokens of the servers the helper started, by URL: api() and apiHeadersOnly() send them. */
const tokens = new Map<string, string>();

/** Flags and variables by which a test chooses the server's authentication itself. */
const AUTH_FLAGS = ['--token', '--no-auth'];
const AUTH_VARIABLES = ['AGENT_RUNNER_TOKEN', 'AGENT_RUNNER_SERVICE__TOKEN', 'AGENT_RUNNER_SERVICE__AUTH'];

/**
 * Starts the real `agent-runner serve` on a free port and waits until it listens. Every route
 * but /health needs a token, so the helper passes `--token <random>` (and api() sends it),
 * unless the test chooses the authentication itself: auth flags or variables of its own, or
 * `token: false` (a server left to generate its token into the state dir).
 */
export async function startServer(
  args: string[] = [],
  options: {
    storeDir?: string;
    env?: NodeJS.ProcessEnv;
    token?: false;
    /** A process group of its own, as under systemd: the test may signal the whole group. */ detached?: boolean;
  } = {},
): Promise<ServerProcess> {
  const storeDir = options.storeDir ?? mkdtempSync(join(tmpdir(), 'store-'));
  const ownAuth = options.token === false || args.some((arg) => AUTH_FLAGS.includes(arg.split('=')[0]!)) || AUTH_VARIABLES.some((name) => options.env?.[name] !== undefined);
  const token = ownAuth ? null : randomBytes(16).toString('hex');
  const {
    child,
    logs,
    stderr,
    exited,
    ready: url,
  } = await spawnLogged(
    [CLI, 'serve', '--addr', '127.0.0.1:0', '--store-dir', storeDir, ...(token === null ? [] : ['--token', token]), ...args],
    // Workspaces made by makeWorkspace() live in the temp dir: it is the workspace root the
    // service lets HTTP callers snapshot under (a test sets the variable to '' for none).
    { AGENT_RUNNER_WORKSPACE_ROOTS: tmpdir(), ...options.env },
    (entry) => (entry.msg === 'agent-runner serving' && typeof entry.url === 'string' ? entry.url : undefined),
    { detached: options.detached ?? false },
  );
  if (token !== null) tokens.set(new URL(url).origin, token);
  void exited.then(() => tokens.delete(new URL(url).origin));
  return {
    url,
    storeDir,
    token,
    child,
    logs,
    stderr,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/**
 * Spawns a node script of ours with the suite's state dir, keeps its JSON log lines, and
 * resolves once `ready` finds what it waits for in one of them; rejects if it exits first.
 */
export async function spawnLogged(
  argv: string[],
  env: NodeJS.ProcessEnv,
  ready: (entry: Record<string, unknown>) => string | undefined,
  options: { detached: boolean } = { detached: false },
): Promise<{ child: ChildProcess; logs: string[]; stderr(): string; exited: Promise<number | null>; ready: string }> {
  const child = spawn(process.execPath, argv, {
    env: processEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached,
  });
  const logs: string[] = [];
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const found = await new Promise<string>((resolve, reject) => {
    let buffered = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      let newline;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        logs.push(line);
        const value = ready(JSON.parse(line) as Record<string, unknown>);
        if (value !== undefined) resolve(value);
      }
    });
    void exited.then((code) => reject(new Error(`${argv[1]} exited ${code} before it was ready: ${stderr}`)));
  });
  return { child, logs, stderr: () => stderr, exited, ready: found };
}

/**
 * Request headers: the test's, over the helper's `Authorization: Bearer <token>` for a server
 * it started. A test sends its own (a wrong token: `{ authorization: 'Bearer wrong' }`) or none
 * at all (`{ authorization: null }`); null drops any header.
 */
export type TestHeaders = Record<string, string | null>;

function withAuth(base: string, headers: TestHeaders): Record<string, string> {
  const token = tokens.get(new URL(base).origin);
  const merged: TestHeaders = { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) };
  for (const [name, value] of Object.entries(headers)) merged[name.toLowerCase()] = value;
  return Object.fromEntries(Object.entries(merged).filter((entry): entry is [string, string] => entry[1] !== null));
}

export async function api(base: string, method: string, path: string, body?: unknown, headers: TestHeaders = {}) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: withAuth(base, { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers }),
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

/**
 * Sends a request line and headers only, never a body, and reads the answer. For a server that
 * must refuse from the headers alone (a Content-Length over its body limit): nothing is written
 * after the headers, so its answer-and-close cannot race a client still writing (EPIPE).
 */
export function apiHeadersOnly(base: string, method: string, path: string, headers: TestHeaders) {
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; json: any; text: string }>((resolve, reject) => {
    const outgoing = request(new URL(path, base), { method, headers: withAuth(base, headers) });
    outgoing.on('error', reject);
    // Only a server that waits for the promised body would leave us here; fail rather than hang.
    outgoing.setTimeout(60_000, () => outgoing.destroy(new Error(`no answer to ${method} ${path} from its headers: the server waits for the body`)));
    outgoing.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', reject);
      response.on('end', () => {
        outgoing.destroy();
        const text = Buffer.concat(chunks).toString('utf8');
        let json: any;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: response.statusCode!, headers: response.headers, json, text });
      });
    });
    outgoing.flushHeaders();
  });
}

/** Polls /health until `holds` (see waitUntil); giving up, quotes the last answer. */
export async function waitForHealth(base: string, holds: (health: any) => boolean, what: string, timeoutMs?: number): Promise<void> {
  let last: unknown;
  await waitUntil(async () => holds((last = (await api(base, 'GET', '/health')).json)), what, { timeoutMs, seen: () => JSON.stringify(last) });
}

/** Polls a job until it has `status` (see waitUntil). */
export async function waitForStatus(base: string, jobId: string, status: string): Promise<void> {
  let last: unknown;
  await waitUntil(async () => (last = (await api(base, 'GET', `/v1/jobs/${jobId}`)).json)?.status === status, `${jobId} is ${status}`, { seen: () => JSON.stringify(last) });
}

export interface JobGate {
  /** What a run job submits to block on the gate. */
  job: { workspace: { source: 'local_path'; path: string }; command: { argv: string[] } };
  /** Lets every job waiting on the gate (and any that starts waiting later) finish, with exit 0. */
  release(): void;
  close(): Promise<void>;
}

/** Where the sandboxes of a server started by startServer() have their work dirs (as root, and not). */
const WORK_DIR_PARENTS = ['workdirs', 'jobs'].map((name) => join(TEST_STATE_DIR, 'runtime', name));

/**
 * A job that ends when the test says so, not after a sleep that a loaded machine may outlast.
 * A job reaches nothing of the host (not even with network allowed), so the gate is a file: the
 * job marks its work dir and waits until the test, which finds the mark among the sandboxes'
 * work dirs on the host, writes the answer beside it.
 */
export function jobGate(): Promise<JobGate> {
  const name = `gate-${randomBytes(8).toString('hex')}`;
  const script = `import os, time\nopen("${name}.waiting", "w").close()\nwhile not os.path.exists("${name}.open"):\n    time.sleep(0.02)\nprint("released")\n`;
  let opener: NodeJS.Timeout | undefined;
  const openWaiting = (parent: string) => {
    for (const entry of readdirSync(parent, { withFileTypes: true })) {
      const work = join(parent, entry.name, 'work');
      if (existsSync(join(work, `${name}.waiting`)) && !existsSync(join(work, `${name}.open`))) writeFileSync(join(work, `${name}.open`), '');
    }
  };
  return Promise.resolve({
    job: { workspace: { source: 'local_path', path: makeWorkspace({ 'gate.py': script }) }, command: { argv: ['python3', 'gate.py'] } },
    release() {
      // A job may start waiting after this: keep answering until the gate is closed.
      opener ??= setInterval(() => {
        for (const parent of WORK_DIR_PARENTS) {
          try {
            openWaiting(parent);
          } catch {
            // Not made (yet), or a work dir removed while we looked: its job is over.
          }
        }
      }, 20);
    },
    close() {
      clearInterval(opener);
      return Promise.resolve();
    },
  });
}

/**
 * A job's state once it is terminal (the long poll answers at the end, or after `seconds`). The
 * wait only bounds "never": a loaded machine queued a microVM job past 60 s.
 */
export async function waitTerminal(base: string, jobId: string, seconds = NOT_THE_SUBJECT_TIMEOUT_S) {
  const response = await api(base, 'GET', `/v1/jobs/${jobId}?wait=${seconds}`);
  assert.equal(response.status, 200);
  return response.json;
}
