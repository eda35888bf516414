import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BackendDescription } from '../contract/backend.js';
import { CodedError, contractError } from '../contract/errors.js';
import type { Runtime } from '../contract/runtimes.js';
import type { SandboxFileWritten } from '../contract/sandbox.js';
import type { SnippetResponse } from '../contract/snippet.js';
import type { TaskResponse } from '../contract/task.js';
import type { RunnerConfig } from '../runner/config.js';
import type { SessionHost } from '../sessions/session-host.js';
import type { SandboxHost } from '../sandboxes/sandbox-host.js';
import type { MetricsJson } from '../util/metrics.js';
import { IpcChannel, IpcClosedError, type IpcEndpoint } from './ipc-channel.js';
import type { WorkerPorts } from './worker-ports.js';
import { asBuffer, type FrontDoorSide, type WorkerSide } from './worker-protocol.js';

type WorkerChannel = IpcChannel<FrontDoorSide, WorkerSide>;

const WORKER_MAIN = fileURLToPath(new URL('./worker-main.js', import.meta.url));
const BACKENDS_REFRESH_MS = 10_000;
/** A file body's slice per call to the worker (which writes it to the agent in 1 MiB chunks). */
const FILE_SLICE_BYTES = 4 * 1024 * 1024;

export interface LogSink {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface WorkerProcessOptions {
  config: RunnerConfig;
  /** Jobs it runs at once. */
  slots: number;
  ports: WorkerPorts;
  /** The process died with these jobs leased. */
  onLost(jobIds: string[]): Promise<void>;
  log: LogSink;
}

/**
 * The worker beside a front door, in a process of its own: it leases and runs jobs, snippets
 * and tasks, holds the live sessions, and every fork a sandbox needs happens there, never in
 * the front door's event loop. It is forked once, at start (and again if it dies: its leased
 * jobs are failed as interrupted, never silently lost; its sessions are lost); it dies with
 * the front door.
 */
export class WorkerProcess {
  private child!: ChildProcess;
  private channel!: WorkerChannel;
  private readonly leased = new Set<string>();
  private nextCall = 1;
  private lastBackends: BackendDescription[] = [];
  private backendsAt = 0;
  private stopping = false;
  /** Where the worker's sandboxes' envd listens; null until it has started (again). */
  private envdSocket: string | null = null;
  private syncSocket: string | null = null;
  /** Where the front door takes back what comes on a handed-over connection that is not a sandbox's (SandboxHost.takeBackAt). */
  private frontDoorSocket: string | null = null;
  private exited!: Promise<void>;

  private constructor(private readonly options: WorkerProcessOptions) {}

  static async start(options: WorkerProcessOptions): Promise<WorkerProcess> {
    const worker = new WorkerProcess(options);
    await worker.spawn();
    return worker;
  }

  /** The sessions, which live in the worker process: each call goes to it by id. */
  readonly sessions: SessionHost = {
    create: (request, apiKey) => this.hostCall('session', () => this.channel.call('sessionCreate', request, apiKey)),
    list: () => this.hostCall('session', () => this.channel.call('sessionList')),
    describe: (id) => this.hostCall('session', () => this.channel.call('sessionDescribe', id)),
    exec: (id, request) => this.hostCall('session', () => this.channel.call('sessionExec', id, request)),
    writeFile: (id, path, content) => this.hostCall('session', () => this.channel.call('sessionWriteFile', id, path, content)),
    readFile: (id, path) => this.hostCall('session', async () => asBuffer(await this.channel.call('sessionReadFile', id, path))),
    remove: (id) => this.hostCall('session', () => this.channel.call('sessionRemove', id)),
  };

  /** The long-lived sandboxes, which live in the worker process too. */
  readonly sandboxes: SandboxHost = {
    create: (request, apiKey) => this.hostCall('sandbox', () => this.channel.call('sandboxCreate', request, apiKey)),
    list: () => this.hostCall('sandbox', () => this.channel.call('sandboxList')),
    describe: (id) => this.hostCall('sandbox', () => this.channel.call('sandboxDescribe', id)),
    setTimeout: (id, seconds) => this.hostCall('sandbox', () => this.channel.call('sandboxSetTimeout', id, seconds)),
    kill: (id) => this.hostCall('sandbox', () => this.channel.call('sandboxKill', id)),
    metrics: (id) => this.hostCall('sandbox', () => this.channel.call('sandboxMetrics', id)),
    connect: (id, timeoutSeconds) => this.hostCall('sandbox', () => this.channel.call('sandboxConnect', id, timeoutSeconds)),
    pause: (id, request) => this.hostCall('sandbox', () => this.channel.call('sandboxPause', id, request)),
    resume: (id, timeoutSeconds) => this.hostCall('sandbox', () => this.channel.call('sandboxResume', id, timeoutSeconds)),
    fork: (id, request) => this.hostCall('sandbox', () => this.channel.call('sandboxFork', id, request)),
    snapshot: (id, request) => this.hostCall('sandbox', () => this.channel.call('sandboxSnapshot', id, request)),
    listSnapshots: (filter) => this.hostCall('sandbox', () => this.channel.call('snapshotList', filter)),
    deleteSnapshot: (idOrName, apiKey) => this.hostCall('sandbox', () => this.channel.call('snapshotDelete', idOrName, apiKey)),
    exec: (id, request) => this.hostCall('sandbox', () => this.channel.call('sandboxExec', id, request)),
    runCode: (id, request) => this.hostCall('sandbox', () => this.channel.call('sandboxRunCode', id, request)),
    writeFile: (id, path, content) => this.hostCall('sandbox', () => this.writeFileInSlices(id, path, content)),
    readFile: (id, path) => this.hostCall('sandbox', async () => asBuffer(await this.channel.call('sandboxReadFile', id, path))),
    maxFileBytes: () => this.options.config.sandboxes.maxFileBytes,
    envdSocket: () => this.envdSocket,
    syncSocket: () => this.syncSocket,
    takeConnection: (socket, head) => this.envdSocket !== null && this.channel.notifyWith('connection', head, socket),
    takeBackAt: (socketPath) => {
      this.frontDoorSocket = socketPath;
      if (this.envdSocket !== null) this.channel.notify('frontDoor', socketPath);
    },
    placeOf: async () => ({ here: true }),
    createVolume: (request, apiKey) => this.hostCall('sandbox', () => this.channel.call('volumeCreate', request, apiKey)),
    listVolumes: (apiKey) => this.hostCall('sandbox', () => this.channel.call('volumeList', apiKey)),
    describeVolume: (idOrName, apiKey) => this.hostCall('sandbox', () => this.channel.call('volumeDescribe', idOrName, apiKey)),
    deleteVolume: (idOrName, apiKey, force) => this.hostCall('sandbox', () => this.channel.call('volumeDelete', idOrName, apiKey, force)),
  };

  /**
   * A file body goes to the worker a slice per call, each appended to the one before: neither
   * process holds a second copy of it (one IPC message of the whole body was one more in each).
   */
  private async writeFileInSlices(id: string, path: string, content: Buffer): Promise<SandboxFileWritten> {
    let written: SandboxFileWritten | undefined;
    // An empty body still makes (or empties) the file: one call.
    for (let offset = 0; offset === 0 || offset < content.length; offset += FILE_SLICE_BYTES) {
      written = await this.channel.call('sandboxWriteFile', id, path, content.subarray(offset, offset + FILE_SLICE_BYTES), offset > 0);
    }
    return { path: written!.path, bytes: content.length };
  }

  exec(request: unknown, signal: AbortSignal): Promise<SnippetResponse> {
    return this.cancellable((token) => this.channel.call('exec', token, request), signal);
  }

  task(request: unknown, signal: AbortSignal): Promise<TaskResponse> {
    return this.cancellable((token) => this.channel.call('task', token, request), signal);
  }

  backends(): Promise<BackendDescription[]> {
    return this.channel.call('backends');
  }

  /** The worker's metrics; none while it (re)starts. */
  metrics(): Promise<MetricsJson> {
    return this.channel.call('metrics').catch(() => []);
  }

  /** The languages the worker's toolchains run. */
  runtimes(): Promise<Runtime[]> {
    return this.channel.call('runtimes');
  }

  /**
   * The last known backends, for /health: answered at once whatever the worker is doing (a
   * busy or restarting worker must not make the service look dead), refreshed behind.
   */
  knownBackends(): BackendDescription[] {
    const preparing = this.lastBackends.some((backend) => backend.state === 'preparing');
    if (preparing || Date.now() - this.backendsAt > BACKENDS_REFRESH_MS) {
      this.backendsAt = Date.now();
      void this.backends().then(
        (backends) => (this.lastBackends = backends),
        () => undefined,
      );
    }
    return this.lastBackends;
  }

  /** Every job the worker still runs is stopped (they end `canceled`, and are recorded). */
  cancelAll(): void {
    this.channel.notify('cancelAll', null);
  }

  /** The service is stopping: every session and sandbox ends now, new ones are refused. */
  async closeSessions(): Promise<void> {
    await Promise.all([this.channel.call('sessionsClose').catch(() => undefined), this.channel.call('sandboxesClose').catch(() => undefined)]);
  }

  /** After the queue closed and its jobs ended: the worker records what it holds and exits. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.channel.call('stop').catch(() => undefined);
    // A worker that died meanwhile has no channel left to close.
    if (this.child.connected) this.child.disconnect();
    await this.exited;
  }

  private async spawn(): Promise<void> {
    const child = fork(WORKER_MAIN, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], serialization: 'advanced' });
    const channel: WorkerChannel = new IpcChannel(child as IpcEndpoint);
    const gone = new AbortController();
    this.child = child;
    this.channel = channel;
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        gone.abort();
        resolve(this.lost(channel, code ?? signal));
      }),
    );
    this.serve(channel, gone.signal);
    ({ envdSocket: this.envdSocket, syncSocket: this.syncSocket } = await channel.call('init', this.options.config, this.options.slots));
    // A worker started again is told where its front door takes requests back, as the first was.
    if (this.frontDoorSocket !== null) channel.notify('frontDoor', this.frontDoorSocket);
    this.lastBackends = await this.backends();
    this.backendsAt = Date.now();
  }

  private serve(channel: WorkerChannel, gone: AbortSignal): void {
    const { queue, runs } = this.options.ports;
    // One round trip hands out a job with what the worker needs to run it (lease and claim).
    channel.handle('lease', async () => {
      const lease = await queue.lease(gone);
      if (!lease) return null;
      // Handed out as the worker died: it counts among the jobs the dead worker held.
      if (gone.aborted) {
        await this.options.onLost([lease.jobId]);
        return null;
      }
      this.leased.add(lease.jobId);
      return { ...lease, ...(await runs.claim(lease.jobId)) };
    });
    // Notices, not calls: the worker needs no answer, and the channel keeps them in order.
    channel.onNotice('running', (jobId) => void runs.markRunning(jobId).catch(() => undefined));
    channel.onNotice('output', ({ jobId, stream, text }) => runs.appendOutput(jobId, stream, text));
    channel.onNotice('complete', (jobId) => {
      this.leased.delete(jobId);
      void queue.complete(jobId);
    });
    channel.onNotice('fail', (jobId) => {
      this.leased.delete(jobId);
      void queue.fail(jobId);
    });
    channel.handle('finish', (jobId, result) => runs.finish(jobId, result));
    channel.onNotice('log', ({ level, obj, msg }) => this.options.log[level](obj, msg));
    this.options.ports.events.onCancel((jobId) => {
      if (this.leased.has(jobId)) channel.notify('cancel', jobId);
    });
  }

  /** A call the worker stops when `signal` aborts: `call` sends the token that names it. */
  private async cancellable<R>(call: (token: number) => Promise<R>, signal: AbortSignal): Promise<R> {
    const token = this.nextCall++;
    const abort = () => this.channel.notify('abort', token);
    signal.addEventListener('abort', abort, { once: true });
    try {
      return await call(token);
    } finally {
      signal.removeEventListener('abort', abort);
    }
  }

  /** A worker that died took its sessions and sandboxes with it: their calls answer `*.lost`, never hang. */
  private async hostCall<R>(what: 'session' | 'sandbox', call: () => Promise<R>): Promise<R> {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof IpcClosedError)) throw error;
      throw new CodedError(contractError(`${what}.lost`, `the worker process that held the ${what} is gone (${error.message}); create another ${what}`));
    }
  }

  private async lost(channel: WorkerChannel, how: number | string | null): Promise<void> {
    channel.close(`exited (${how})`);
    this.envdSocket = null;
    this.syncSocket = null;
    if (this.stopping) return;
    const jobs = [...this.leased];
    this.leased.clear();
    this.options.log.error({ exit: how, jobs }, 'the worker process died; its jobs are failed as interrupted and a new worker starts');
    await this.options.onLost(jobs);
    await this.spawn();
  }
}
