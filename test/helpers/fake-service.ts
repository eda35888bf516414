import { mkdtempSync } from 'node:fs';
import { templateNames } from '../../src/sandboxes/templates.js';
import { servedTemplateStore } from '../../src/templates/served-templates.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import type { BackendDescription } from '../../src/contract/backend.js';
import type { OutputStream } from '../../src/contract/job-events.js';
import { CodedError, contractError } from '../../src/contract/errors.js';
import type { RunJobResult, TerminalStatus } from '../../src/contract/run-job.js';
import type { Runtime } from '../../src/contract/runtimes.js';
import type { SnippetResponse } from '../../src/contract/snippet.js';
import type { TaskResponse } from '../../src/contract/task.js';
import { buildApp } from '../../src/http/app.js';
import { MemoryQueue } from '../../src/queue/memory-queue.js';
import { loadConfig } from '../../src/runner/config.js';
import { unrunResult } from '../../src/runner/run-job.js';
import { RunnerRuntime } from '../../src/runner/runtime.js';
import { LocalJobEvents } from '../../src/jobs/events.js';
import { FrontDoor } from '../../src/jobs/front-door.js';
import type { WorkerProcess } from '../../src/jobs/worker-process.js';
import type { SessionHost } from '../../src/sessions/session-host.js';
import { DiskRunStore } from '../../src/store/disk-store.js';
import { TEST_STATE_DIR } from './runtime.js';
import type { TestHeaders } from './server.js';
import { FakeSandboxHost } from './fake-sandboxes.js';
import type { SandboxHost } from '../../src/sandboxes/sandbox-host.js';

/**
 * The HTTP face in-process, for its contract (status codes, auth, media types, OpenAPI, Piston
 * shapes, validation): Fastify's inject() against buildApp(), nothing listening, no process
 * forked. The desk is the real front door (admission, the queue, listing, cancel) over the
 * in-memory queue and a store in a temp dir; the worker is a fake of what the routes use of the
 * worker process, answering what the test tells it to. Jobs stay queued until the test finishes
 * them (finishJob) as a worker would. What the real service adds (a listening socket, the worker
 * process, sandboxes) is what the integration files' end-to-end smokes keep.
 *
 * This is the one place that knows buildApp's options: when they change, only this file does.
 */

/** What the routes use of the worker process (src/jobs/worker-process.ts). */
export type RouteWorker = Pick<WorkerProcess, 'exec' | 'task' | 'backends' | 'runtimes' | 'knownBackends'>;

/** The three kinds, as a host with all of them ready describes them. */
const READY_BACKENDS: BackendDescription[] = (['local_process', 'gvisor', 'microvm'] as const).map((kind) => ({
  kind,
  aliases: kind === 'microvm' ? ['firecracker'] : [],
  available: true,
  state: 'ready',
  notes: [],
  capabilities: {
    network: ['none'],
    memory: ['cgroup'],
    snapshot: false,
    pause: 'files',
    root_inside: kind !== 'gvisor',
    host_work_dir: kind !== 'microvm',
    volumes: kind === 'local_process' ? 'attach' : kind === 'gvisor' ? 'bind' : 'share',
    profiles: ['snippet', 'run-job', 'task', 'workspace'],
  },
}));

const RUNTIMES: Runtime[] = [
  { language: 'python', version: '3.11.2', aliases: ['py', 'python3'], runtime: 'python' },
  { language: 'node', version: '20.19.0', aliases: ['js', 'javascript'], runtime: 'node' },
];

/** A worker that runs nothing: it records the snippets it was asked and answers what the test set. */
export class FakeWorker implements RouteWorker {
  readonly snippets: unknown[] = [];
  answerSnippet: (request: unknown, signal: AbortSignal) => Promise<SnippetResponse> = () => Promise.resolve(snippetAnswer({ stdout: 'ok\n' }));
  answerTask: (request: unknown, signal: AbortSignal) => Promise<TaskResponse> = (request) =>
    Promise.resolve({ task_id: (request as { task_id?: string }).task_id ?? 'task', result: [], print_args: [], usage: USAGE } as TaskResponse);

  exec(request: unknown, signal: AbortSignal): Promise<SnippetResponse> {
    this.snippets.push(request);
    return this.answerSnippet(request, signal);
  }

  task(request: unknown, signal: AbortSignal): Promise<TaskResponse> {
    return this.answerTask(request, signal);
  }

  backends(): Promise<BackendDescription[]> {
    return Promise.resolve(READY_BACKENDS);
  }

  runtimes(): Promise<Runtime[]> {
    return Promise.resolve(RUNTIMES);
  }

  knownBackends(): BackendDescription[] {
    return READY_BACKENDS;
  }
}

const USAGE = { wall_ms: 1, cpu_user_ms: 0, cpu_system_ms: 0, peak_memory_bytes: 1 };

/** A snippet's answer as the worker gives it: exit 0 and nothing written, but what `fields` say. */
export function snippetAnswer(fields: Partial<SnippetResponse>): SnippetResponse {
  return { trace_id: '', stdout: '', stderr: '', exit_code: 0, error: '', usage: USAGE, ...fields };
}

export interface FakeServiceOptions {
  /** Required on every route but /health; null: none (`--no-auth`). Default: a fixed test token. */
  token?: string | null;
  bodyLimitBytes?: number;
  queueCapacity?: number;
  execConcurrency?: number;
  /** Configuration variables over the test runner's environment (AGENT_RUNNER_RUN_JOB__..., as startServer's env). */
  env?: NodeJS.ProcessEnv;
  /** Where HTTP callers may name a local_path workspace. Default: the temp dir, where makeWorkspace() makes them, as for startServer(). */
  workspaceRoots?: string[];
  /** The run store's directory (admission refuses workspaces that overlap it). Default: a new temp dir. */
  storeDir?: string;
  /** Where the sandbox routes reach sandboxes. Default: a FakeSandboxHost of records. */
  sandboxes?: SandboxHost;
}

export interface InjectedResponse {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  json: any;
  text: string;
}

export interface FakeService {
  app: FastifyInstance;
  worker: FakeWorker;
  token: string | null;
  /**
   * As helpers/server.ts's api(): the token sent unless `headers` say otherwise (null drops a
   * header); a string or Buffer body is sent as it is, anything else as JSON.
   */
  api(method: string, path: string, body?: unknown, headers?: TestHeaders): Promise<InjectedResponse>;
  /** Leases the job as a worker would and records `result` (the job's terminal state) for it. */
  finishJob(jobId: string, result: (request: unknown, runtime: RunnerRuntime) => RunJobResult): Promise<void>;
  /** Leases the job and marks it running, as a worker would: then it writes output for its followers, and finishes. */
  startJob(jobId: string): Promise<RunningJob>;
  close(): Promise<void>;
}

/** A job a test runs as its worker would. */
export interface RunningJob {
  write(stream: OutputStream, text: string): void;
  finish(result: (request: unknown, runtime: RunnerRuntime) => RunJobResult): Promise<void>;
}

/** A multipart form as fetch would send it: its bytes and its Content-Type (with the boundary). */
export async function encodeForm(form: FormData): Promise<{ body: Buffer; contentType: string }> {
  const encoded = new Response(form);
  return { body: Buffer.from(await encoded.arrayBuffer()), contentType: encoded.headers.get('content-type')! };
}

/** A sandbox host with no session: the contract tests here make none (test/integration/http/sessions.test.ts does). */
const noSession = (id: string) => Promise.reject(new CodedError(contractError('session.not_found', `no session ${JSON.stringify(id)}`)));
const noSessions: SessionHost = {
  create: () => Promise.reject(new CodedError(contractError('backend.unavailable', 'the fake service hosts no sessions'))),
  list: () => Promise.resolve([]),
  describe: noSession,
  exec: noSession,
  writeFile: noSession,
  readFile: noSession,
  remove: noSession,
};

const TEST_TOKEN = 'test-token-0123456789abcdef0123456789';

export async function fakeService(options: FakeServiceOptions = {}): Promise<FakeService> {
  const storeDir = options.storeDir ?? mkdtempSync(join(tmpdir(), 'store-'));
  const runtime = new RunnerRuntime(
    loadConfig({ ...process.env, ...options.env }, { stateDir: TEST_STATE_DIR, runJob: { workspaceRoots: options.workspaceRoots ?? [tmpdir()] }, service: { storeDir } }),
  );
  const log = pino({ level: 'silent' });
  const queue = new MemoryQueue(options.queueCapacity ?? 100);
  const frontDoor = new FrontDoor(runtime, { queue, store: new DiskRunStore(storeDir), events: new LocalJobEvents() }, { retention: { maxAgeMs: null, maxCount: null }, log });
  await frontDoor.start();
  const worker = new FakeWorker();
  const sandboxes = options.sandboxes ?? new FakeSandboxHost();
  const token = options.token === undefined ? TEST_TOKEN : options.token;
  const settings = runtime.config.service;
  const app = await buildApp({
    frontDoor,
    // The routes use only what RouteWorker names: the fake has that, not the process plumbing.
    worker: worker as unknown as WorkerProcess,
    sessions: noSessions,
    sandboxes,
    templates: { configured: templateNames(runtime.config.sandboxes), ...servedTemplateStore(runtime.config, runtime.backends.get('local_process')) },
    sessionFileBytes: runtime.config.sessions.maxFileBytes,
    defaultBackend: runtime.backends.defaultKind,
    token,
    apiKeys: settings.apiKeys,
    bodyLimitBytes: options.bodyLimitBytes ?? settings.bodyLimitBytes,
    bodyLimitValues: settings.bodyLimitValues,
    clients: settings.clients,
    execConcurrency: options.execConcurrency ?? 2,
    logger: log,
  });
  const ports = frontDoor.workerPorts();
  const startJob = async (jobId: string): Promise<RunningJob> => {
    const lease = await ports.queue.lease();
    if (lease?.jobId !== jobId) throw new Error(`leased ${lease?.jobId ?? 'nothing'}, not ${jobId}: run jobs in the order they were queued`);
    const { request } = await ports.runs.claim(jobId);
    await ports.runs.markRunning(jobId);
    return {
      write: (stream, text) => ports.runs.appendOutput(jobId, stream, text),
      async finish(result) {
        await ports.runs.finish(jobId, result(request, runtime));
        await ports.queue.complete(jobId);
      },
    };
  };
  return {
    app,
    worker,
    token,
    async api(method, path, body, headers = {}) {
      const merged: TestHeaders = { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) };
      for (const [name, value] of Object.entries(headers)) merged[name.toLowerCase()] = value;
      const response = await app.inject({
        method: method as 'GET',
        url: path,
        headers: Object.fromEntries(Object.entries(merged).filter((entry): entry is [string, string] => entry[1] !== null)),
        ...(body !== undefined ? { payload: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body) } : {}),
      });
      let json: any;
      try {
        json = JSON.parse(response.body);
      } catch {
        json = undefined;
      }
      return { status: response.statusCode, headers: response.headers, json, text: response.body };
    },
    async finishJob(jobId, result) {
      await (await startJob(jobId)).finish(result);
    },
    startJob,
    async close() {
      await app.close();
      await frontDoor.close();
      await frontDoor.flushStore();
    },
  };
}

/** A job's result as its run would record it: `status`, with `fields` (an error among them) over what a job that never ran records. */
export function jobResult(status: TerminalStatus, fields: Partial<RunJobResult> = {}): (request: unknown, runtime: RunnerRuntime) => RunJobResult {
  return (request, runtime) => {
    const unrun = unrunResult(request, status, { code: 'run.exit_nonzero', message: 'set by the test' }, runtime);
    delete unrun.error;
    return { ...unrun, ...fields };
  };
}
