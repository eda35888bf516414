import { RunnerRuntime } from '../runner/runtime.js';
import { executeSnippet } from '../runner/snippet.js';
import { Sessions } from '../sessions/sessions.js';
import { Sandboxes } from '../sandboxes/sandboxes.js';
import { createEnvdServer, envdLimits, type EnvdServer } from '../envd/envd-server.js';
import { listenPrivateSocket } from '../isolation/host/private-socket.js';
import { clientConnections } from '../envd/client-connections.js';
import { JobStaging } from '../runner/staging.js';
import { runTask } from '../tasks/run-task.js';
import { IpcChannel, IpcClosedError, type IpcEndpoint } from './ipc-channel.js';
import { BACKEND_KINDS } from '../contract/backend-kinds.js';
import { counterOf, gaugeOf, jobDuration, jobsEnded, metricsJson, startProcessMetrics } from '../util/metrics.js';
import { WorkerLoop } from './worker-loop.js';
import type { WorkerPorts } from './worker-ports.js';
import type { SandboxBackend } from '../isolation/types.js';
import { withinDeadline } from '../util/deadline.js';
import { VolumeStore, volumeSettings } from '../volumes/volume-store.js';
import { SandboxVolumes } from '../sandboxes/sandbox-volumes.js';
import { createSyncServer } from '../sandboxes/sync-server.js';
import { asBuffer, type FrontDoorSide, type LogLevel, type WorkerSide } from './worker-protocol.js';

/**
 * The worker process (see worker-process.ts), the one sandbox host beside a front door: its
 * job loop, the snippets and tasks asked over HTTP, and the live sessions. Its ports are calls
 * to the front door that forked it. It has no stdout of its own (the front door's is its log); what it logs goes
 * to the front door's logger.
 */
const channel = new IpcChannel<WorkerSide, FrontDoorSide>(process as IpcEndpoint);
/** How long a worker whose front door is gone takes to end its sandboxes and sessions before it exits anyway. */
const ORPHANED_RELEASE_MS = 10_000;
/** Ends every sandbox and session this worker holds and those started ahead, each released (its processes, its work dir's mount); nothing before init. */
let releaseAll = async (): Promise<void> => undefined;
// The front door is gone (even SIGKILLed): so are we. Our sandboxes and sessions end first, their
// work dirs unmounted and removed (no one else would until the next start on this state dir),
// within a bound; what is left then goes with us (PDEATHSIG).
process.on('disconnect', () => {
  const released = withinDeadline(releaseAll(), ORPHANED_RELEASE_MS, () => new Error('the sandboxes did not end in time'));
  void released.catch(() => undefined).finally(() => process.exit(0));
});
// systemd and a terminal's Ctrl-C signal every process of the service at once. Dying here
// would end our running jobs `run.interrupted` while the front door grants them their grace:
// the front door stops us in order instead ('cancelAll', then 'stop', then it disconnects).
for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => undefined);

const log = (level: LogLevel) => (obj: object, msg: string) => channel.notify('log', { level, obj, msg });
const cancelListeners: Array<(jobId: string) => void> = [];
/** A lease arrives with its claim (one round trip); claim() then reads it here. */
const claims = new Map<string, { request: unknown; runDir: string }>();
const ports: WorkerPorts = {
  queue: {
    lease: async () => {
      // The front door gone, no job comes any more: the slot ends as on a closed queue (a rejection
      // here would crash the worker before it released its sandboxes).
      const leased = await channel.call('lease').catch((error: unknown) => {
        if (error instanceof IpcClosedError) return null;
        throw error;
      });
      if (!leased) return null;
      claims.set(leased.jobId, { request: leased.request, runDir: leased.runDir });
      return { jobId: leased.jobId };
    },
    complete: async (jobId) => channel.notify('complete', jobId),
    fail: async (jobId) => channel.notify('fail', jobId),
  },
  runs: {
    claim: async (jobId) => {
      const claim = claims.get(jobId);
      if (!claim) throw new Error(`job ${jobId} was not leased to this worker`);
      claims.delete(jobId);
      return claim;
    },
    markRunning: async (jobId) => channel.notify('running', jobId),
    appendOutput: (jobId, stream, text) => channel.notify('output', { jobId, stream, text }),
    finish: (jobId, result) => channel.call('finish', jobId, result),
  },
  events: { onCancel: (listener) => void cancelListeners.push(listener) },
};
channel.onNotice('cancel', (jobId) => cancelListeners.forEach((listener) => listener(jobId)));

/** Snippets and tasks in flight, by the caller's token, so a hung-up client stops its job. */
const calls = new Map<number, AbortController>();
channel.onNotice('abort', (token) => calls.get(token)?.abort());
function abortable<T>(token: number, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  calls.set(token, controller);
  return work(controller.signal).finally(() => calls.delete(token));
}

startProcessMetrics('worker');
gaugeOf('agent_runner_sandboxes', 'Long-lived sandboxes this worker holds, by backend kind and state (running, paused; ended ones recently).', ['backend', 'state'], async () => {
  const counts = new Map<string, [{ backend: string; state: string }, number]>();
  for (const { backend, state } of sandboxes ? await sandboxes.list() : []) {
    const counted = counts.get(`${backend}/${state}`) ?? [{ backend, state }, 0];
    counts.set(`${backend}/${state}`, [counted[0], counted[1] + 1]);
  }
  return [...counts.values()];
});

counterOf(
  'agent_runner_warm_pool_takes_total',
  'Sandboxes asked of a warm pool: hit (one was ready) or miss (one was made for the job), by backend kind.',
  ['backend', 'outcome'],
  () => {
    const counts: Array<[{ backend: string; outcome: string }, number]> = [];
    for (const kind of BACKEND_KINDS) {
      const takes = backendOf(kind)?.warmTakes;
      if (takes) counts.push([{ backend: kind, outcome: 'hit' }, takes.hit], [{ backend: kind, outcome: 'miss' }, takes.miss]);
    }
    return counts;
  },
);

/** The backend of a kind, when the runtime is up and has one. */
function backendOf(kind: string): SandboxBackend | undefined {
  try {
    return runtime?.backends.get(kind);
  } catch {
    return undefined;
  }
}

/** Counts a snippet or task that ran here (its face, how it ended, its backend) and times it. */
async function counted<T>(face: 'snippet' | 'task', request: unknown, run: () => Promise<T>, statusOf: (response: T) => string): Promise<T> {
  const started = performance.now();
  const response = await run();
  const requested = (request as { backend?: { kind?: unknown } } | null)?.backend?.kind;
  const backend = typeof requested === 'string' ? requested : runtime.backends.defaultKind;
  const status = statusOf(response);
  jobsEnded.inc({ face, status, backend });
  const { trace_id: traceId, task_id: taskId } = (request ?? {}) as { trace_id?: unknown; task_id?: unknown };
  const durationMs = performance.now() - started;
  log('info')(
    { face, trace_id: traceId, task_id: taskId, backend, status, duration_ms: Math.round(durationMs), usage: (response as { usage?: unknown }).usage },
    `${face} finished`,
  );
  jobDuration.observe({ face, backend }, durationMs / 1000);
  return response;
}

let runtime: RunnerRuntime;
let loop: WorkerLoop;
let sessions: Sessions;
let sandboxes: Sandboxes;
let volumes: SandboxVolumes;
let volumeStore: VolumeStore;
let envd: { server: EnvdServer; close(): Promise<void> };
channel.handle('init', async (config, slots) => {
  runtime = new RunnerRuntime(config);
  // Before the first await: the front door may route a session call here while init still runs.
  sessions = new Sessions(runtime);
  volumeStore = new VolumeStore(volumeSettings(runtime.config));
  sandboxes = new Sandboxes(runtime, (id) => server.sandboxEnded(id), volumeStore);
  volumes = new SandboxVolumes(volumeStore, sandboxes);
  releaseAll = async () => {
    await Promise.all([sessions.close(), sandboxes.close()]);
    // Their sandboxes have ended: nothing holds their file systems.
    await volumeStore.close();
    // The backends' sandboxes started ahead for the next create hold work dirs too.
    await Promise.all([runtime.dispose(), envd?.close()]);
  };
  const server = createEnvdServer(
    { lookup: (id) => sandboxes.access(id), runningIds: () => sandboxes.runningIds(), wake: (id) => sandboxes.wake(id) },
    sandboxes.codeContexts,
    envdLimits(runtime.config),
    volumes,
  );
  // Image builds and probes take seconds on a fresh host: the service answers meanwhile.
  runtime.backends.prepareInBackground();
  const orphans = await JobStaging.reapOrphans(runtime.stagingDir);
  if (orphans > 0) log('info')({ orphans }, 'removed work dirs left by a previous process');
  loop = new WorkerLoop(ports, runtime, slots, { info: log('info'), error: log('error') });
  loop.start();
  const listening = await listenPrivateSocket(server.server, 'envd');
  const clients = clientConnections(server, (id) => sandboxes.access(id) !== undefined, runtime.config.service.clients);
  // A client's connection handed over for its sandboxes' traffic is served here from now on.
  channel.onNotice('connection', (head, socket) => socket && clients.take(socket, Buffer.from(head)));
  channel.onNotice('frontDoor', (socketPath) => clients.returnTo(socketPath));
  // Bulk sync: on a socket of its own, which only the front door reaches (after its auth).
  const syncing = await listenPrivateSocket(
    createSyncServer({
      withSandbox: (id, use) => sandboxes.withAgent(id, use),
      withVolume: (id, use) => volumes.withContent(id, use),
      maxFileBytes: runtime.config.sandboxes.maxFileBytes,
    }),
    'sync',
  );
  envd = { server, close: () => Promise.all([clients.close(), listening.close(), syncing.close()]).then(() => undefined) };
  return { envdSocket: listening.socketPath, syncSocket: syncing.socketPath };
});
channel.handle('exec', (token, request) =>
  abortable(token, (signal) =>
    counted(
      'snippet',
      request,
      () => executeSnippet(request, { runtime, signal }),
      (response) => (response.exit_code === 124 ? 'timed_out' : response.error ? 'failed' : 'completed'),
    ),
  ),
);
channel.handle('task', (token, request) =>
  abortable(token, (signal) =>
    counted(
      'task',
      request,
      () => runTask(request, { runtime, signal }),
      (response) => ('error_code' in response ? (response.error_code === 'run.timed_out' ? 'timed_out' : 'failed') : 'completed'),
    ),
  ),
);
channel.handle('metrics', () => metricsJson());
channel.handle('backends', () => runtime.backends.describe());
channel.handle('runtimes', () => runtime.toolchains.runtimes());
channel.onNotice('cancelAll', () => loop.cancelAll());
channel.handle('sessionCreate', (request, apiKey) => sessions.create(request, apiKey));
channel.handle('sessionList', () => sessions.list());
channel.handle('sessionDescribe', (id) => sessions.describe(id));
channel.handle('sessionExec', (id, request) => sessions.exec(id, request));
channel.handle('sessionWriteFile', (id, path, content) => sessions.writeFile(id, path, asBuffer(content)));
channel.handle('sessionReadFile', (id, path) => sessions.readFile(id, path));
channel.handle('sessionRemove', (id) => sessions.remove(id));
channel.handle('sessionsClose', () => sessions.close());
channel.handle('sandboxCreate', (request, apiKey) => sandboxes.create(request, apiKey));
channel.handle('sandboxList', () => sandboxes.list());
channel.handle('sandboxDescribe', (id) => sandboxes.describe(id));
channel.handle('sandboxSetTimeout', (id, seconds) => sandboxes.setTimeout(id, seconds));
channel.handle('sandboxKill', (id) => sandboxes.kill(id));
channel.handle('sandboxMetrics', (id) => sandboxes.metrics(id));
channel.handle('sandboxConnect', (id, timeoutSeconds) => sandboxes.connect(id, timeoutSeconds));
channel.handle('sandboxPause', (id, request) => sandboxes.pause(id, request));
channel.handle('sandboxResume', (id, timeoutSeconds) => sandboxes.resume(id, timeoutSeconds));
channel.handle('sandboxFork', (id, request) => sandboxes.fork(id, request));
channel.handle('sandboxSnapshot', (id, request) => sandboxes.snapshot(id, request));
channel.handle('snapshotList', (filter) => sandboxes.listSnapshots(filter));
channel.handle('snapshotDelete', (idOrName, apiKey) => sandboxes.deleteSnapshot(idOrName, apiKey));
channel.handle('sandboxExec', (id, request) => sandboxes.exec(id, request));
channel.handle('sandboxRunCode', (id, request) => sandboxes.runCode(id, request));
channel.handle('sandboxWriteFile', (id, path, content, append) => sandboxes.writeFile(id, path, asBuffer(content), append));
channel.handle('sandboxReadFile', (id, path) => sandboxes.readFile(id, path));
channel.handle('sandboxesClose', () => sandboxes.close());
channel.handle('volumeCreate', (request, apiKey) => volumes.create(request, apiKey));
channel.handle('volumeList', (apiKey) => volumes.list(apiKey));
channel.handle('volumeDescribe', (idOrName, apiKey) => volumes.describe(idOrName, apiKey));
channel.handle('volumeDelete', (idOrName, apiKey, force) => volumes.delete(idOrName, apiKey, force));
channel.handle('stop', async () => {
  await Promise.all([loop.stopped(), sessions.close(), sandboxes.close()]);
  await Promise.all([envd.close(), volumeStore.close()]);
  await runtime.dispose();
});
