import { availableParallelism } from 'node:os';
import type { Duplex } from 'node:stream';
import { CodedError, contractError, invalidField } from '../contract/errors.js';
import type { AgentUser } from '../contract/sandbox-agent.js';
import type {
  Sandbox,
  SandboxCreateRequest,
  SandboxForkRequest,
  SandboxForkResult,
  SandboxPauseRequest,
  Snapshot,
  SnapshotCreateRequest,
  SandboxExecRequest,
  SandboxExecResult,
  SandboxFileWritten,
  SandboxMetrics,
  SandboxRunCodeRequest,
  SandboxRunCodeResult,
} from '../contract/sandbox.js';
import type { Template } from '../contract/templates.js';
import { CodeContexts, ContextError } from '../interpreter/code-contexts.js';
import { BridgeLost } from '../interpreter/kernel-bridge.js';
import { MAX_CELL_RESULT_BYTES, runCell } from '../interpreter/run-cell.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import { snippetTimeout } from '../runner/snippet.js';
import { sandboxDuration } from '../util/metrics.js';
import { Semaphore } from '../util/semaphore.js';
import type { VolumeStore } from '../volumes/volume-store.js';
import { SandboxGoneError, type SandboxAgentPort } from './agent-port.js';
import { busy, describePaused, fromState, KeptSandboxes, type SandboxIdentity } from './kept-sandboxes.js';
import { LiveSandbox, SANDBOX_HOME, SANDBOX_USER } from './live-sandbox.js';
import { runToEnd } from './sandbox-exec.js';
import { readSandboxFile, writeSandboxFile } from './sandbox-files.js';
import { keyFullError } from './sandbox-host.js';
import { SandboxPlanner, type LaunchRequest } from './sandbox-plan.js';
import { SandboxTable } from './sandbox-table.js';
import type { KeptState } from './snapshot-store.js';
import { TemplateCaptures } from './template-captures.js';
import { runTemplateStart } from './template-start.js';

/** What a face of a sandbox's agent (envd) needs to serve it. */
export interface SandboxAccess {
  agent: SandboxAgentPort;
  /** Required of every request to its envd when set (a secure sandbox). */
  accessToken: string | null;
  home: string;
  /** Whether it has a root of its own: then root's requests start in root's home; otherwise they act as the user. */
  rootInside: boolean;
  /** Whom its processes run as when a request names no one. */
  defaultUser: AgentUser;
  /** The python inside it (the system's, at the path the host resolved). */
  python: string;
  /** The name of the API key that made it; undefined: the service token. */
  apiKey?: string;
  /** The token each request to its ports must carry; null: they are public. */
  trafficToken: string | null;
  /** The Host header its ports' servers see; null: the client's. */
  maskRequestHost: string | null;
  /** A connection to a port of its loopback made by the host, or null where only its agent can make one (LiveSandbox.connectPort). */
  connectPort?: (port: number) => Promise<Duplex> | null;
}

/**
 * The long-lived sandboxes of one process (the worker process, the sandbox host): made, found
 * and killed here, at most `sandboxes.max` at once. An ended sandbox is remembered for a while,
 * so its id answers with why it ended rather than with nothing.
 */
export class Sandboxes {
  /** Its sandboxes and their kept states by id, which every part below shares. */
  private readonly table = new SandboxTable();
  /** The host's own sandboxes (startHelper), running. */
  private readonly helpers = new Set<LiveSandbox>();
  /** Aborted when a sandbox ends: what waits on its agent (exec) stops waiting. */
  private readonly endings = new Map<string, AbortController>();
  private closed = false;
  /** The code-interpreter contexts of these sandboxes (port 49999 and run_code). */
  readonly codeContexts = new CodeContexts();
  /** What a create becomes: its template, backend, network, volumes and limits. */
  private readonly planner: SandboxPlanner;
  /** Pauses, resumes, forks and snapshots, and the states they keep. */
  private readonly kept: KeptSandboxes;
  /** Templates with a start command, captured once ready where the backend keeps memory. */
  private readonly captures: TemplateCaptures;
  /** The sandbox starts each backend kind runs at once (startSlots). */
  private readonly starts = new Map<string, Semaphore>();

  constructor(
    private readonly runtime: RunnerRuntime,
    /** Told when a sandbox has ended, so what serves it (envd) forgets it. */
    private readonly onEnded: (id: string) => void = () => undefined,
    /** The volumes its sandboxes may mount; none where absent. */
    readonly volumes: VolumeStore | null = null,
  ) {
    this.planner = new SandboxPlanner(runtime, volumes);
    this.kept = new KeptSandboxes(runtime, this.table, this.codeContexts, {
      launch: (...args) => this.launch(...args),
      connect: (id, timeoutSeconds) => this.connect(id, timeoutSeconds),
    });
    this.captures = new TemplateCaptures(runtime, this.table, this.kept, (request, from) => this.launch(request, from));
  }

  /**
   * Starts a sandbox, from a template or a snapshot, for the API key named `apiKey` (undefined: the
   * service token); throws CodedError (validation, template.not_found, sandboxes.full,
   * sandboxes.key_full, backend.*). Another key's snapshot is no template of this key's.
   */
  async create(request: SandboxCreateRequest, apiKey?: string): Promise<Sandbox> {
    await this.kept.loaded;
    const snapshot = this.kept.snapshotFor(request.template, apiKey);
    const owned: LaunchRequest = {
      ...request,
      ...(apiKey !== undefined && { api_key: apiKey }),
      ...(snapshot === undefined && { imageTemplate: await this.planner.imageTemplateOf(request.template ?? 'base') }),
    };
    const from = snapshot ?? (await this.captures.templateCapture(owned));
    const sandbox = from ? await this.launch(fromState(from, owned), from) : await this.launch(owned, null);
    return sandbox.describe(true);
  }

  async describe(id: string): Promise<Sandbox> {
    await this.kept.loaded;
    const paused = this.table.pausedState(id);
    return paused ? describePaused(paused) : this.kept.described(this.table.find(id));
  }

  /** Running, paused and recently ended sandboxes. */
  async list(): Promise<Sandbox[]> {
    await this.kept.loaded;
    const paused = [...this.table.kept.values()].filter((state) => state.purpose === 'pause').map(describePaused);
    return [...[...this.table.sandboxes.values()].map((sandbox) => this.kept.described(sandbox)), ...paused];
  }

  /** Pauses a running sandbox: what its backend keeps of it is kept, and it ends (KeptSandboxes.pause). */
  pause(id: string, request: SandboxPauseRequest = {}): Promise<Sandbox> {
    return this.kept.pause(id, request);
  }

  /** Resumes a paused sandbox under its own id; a running one is left as it is (`resumed` false). */
  resume(id: string, timeoutSeconds?: number): Promise<{ sandbox: Sandbox; resumed: boolean }> {
    return this.kept.resume(id, timeoutSeconds);
  }

  /** Resumes a paused sandbox that asked to be resumed by requests (auto_resume); true when it runs now. */
  wake(id: string): Promise<boolean> {
    return this.kept.wake(id);
  }

  /** `count` copies of a running sandbox, each a sandbox of its own; the parent keeps running. */
  fork(id: string, request: SandboxForkRequest = {}): Promise<SandboxForkResult> {
    return this.kept.fork(id, request);
  }

  /** Keeps a running sandbox's state as a snapshot, a template of new sandboxes; the sandbox keeps running. */
  snapshot(id: string, request: SnapshotCreateRequest = {}): Promise<Snapshot> {
    return this.kept.snapshot(id, request);
  }

  listSnapshots(filter: { sandbox_id?: string; name?: string } = {}): Promise<Snapshot[]> {
    return this.kept.listSnapshots(filter);
  }

  /** Deletes a snapshot the key `apiKey` reaches by id or name; sandboxes made from it are not touched. */
  deleteSnapshot(idOrName: string, apiKey?: string): Promise<Snapshot> {
    return this.kept.deleteSnapshot(idOrName, apiKey);
  }

  setTimeout(id: string, timeoutSeconds: number): Sandbox {
    const sandbox = this.table.find(id);
    const max = this.runtime.config.sandboxes.maxTimeoutSeconds;
    if (timeoutSeconds > max) throw invalidField(`timeout must be at most ${max} seconds, got ${timeoutSeconds}`, 'timeout');
    sandbox.setTimeout(timeoutSeconds * 1000);
    return sandbox.describe();
  }

  connect(id: string, timeoutSeconds?: number): Sandbox {
    const sandbox = this.table.running(id);
    if (timeoutSeconds !== undefined && Date.now() + timeoutSeconds * 1000 > Date.parse(sandbox.describe().end_at)) this.setTimeout(id, timeoutSeconds);
    return sandbox.describe(true);
  }

  metrics(id: string): Promise<SandboxMetrics> {
    return this.table.find(id).metrics();
  }

  /** Kills a sandbox; a paused one's kept state is deleted. */
  async kill(id: string): Promise<Sandbox> {
    await this.kept.loaded;
    const paused = this.table.pausedState(id);
    if (paused) {
      if (this.kept.isChanging(id)) throw busy(id);
      await this.kept.dropState(id);
      return { ...describePaused(paused), state: 'ended', ended_reason: 'killed while paused' };
    }
    // Being kept (a fork or snapshot of one that keeps memory ends it and brings it back): after that.
    if (this.kept.isChanging(id)) throw busy(id);
    const sandbox = this.table.find(id);
    await sandbox.end('killed');
    return sandbox.describe();
  }

  /** Runs a command to its end (sandbox-exec.ts), its timeout and output caps a snippet's. */
  exec(id: string, request: SandboxExecRequest): Promise<SandboxExecResult> {
    const limits = this.runtime.config.snippet;
    const timeoutSeconds = this.snippetTimeout(request.timeout);
    return this.withAgent(id, (agent) =>
      runToEnd(
        id,
        agent,
        request,
        { timeoutMs: Math.round(timeoutSeconds * 1000), maxStdoutBytes: limits.maxStdoutBytes, maxStderrBytes: limits.maxStderrBytes },
        this.endings.get(id)!.signal,
      ),
    );
  }

  /** Runs a cell in the sandbox's code interpreter to its end (interpreter/run-cell.ts), its timeout and output caps a snippet's. */
  runCode(id: string, request: SandboxRunCodeRequest): Promise<SandboxRunCodeResult> {
    const limits = this.runtime.config.snippet;
    const timeoutSeconds = this.snippetTimeout(request.timeout);
    const sandbox = this.table.find(id);
    const cellLimits = {
      timeoutMs: Math.round(timeoutSeconds * 1000),
      maxStdoutBytes: limits.maxStdoutBytes,
      maxStderrBytes: limits.maxStderrBytes,
      maxResultBytes: MAX_CELL_RESULT_BYTES,
    };
    return this.withAgent(id, async (agent) => {
      try {
        return await runCell(this.codeContexts, id, { agent, python: sandbox.python, home: SANDBOX_HOME }, request, cellLimits, this.endings.get(id)!.signal);
      } catch (error) {
        if (error instanceof ContextError) throw contextRefusal(error);
        if (error instanceof BridgeLost && !sandbox.running) throw new SandboxGoneError(error.message);
        throw error;
      }
    });
  }

  /** A command's or cell's timeout in seconds (runner/snippet.ts snippetTimeout), refused above the snippet maximum. */
  private snippetTimeout(asked: number | undefined): number {
    const timeout = snippetTimeout(this.runtime.config.snippet, asked);
    if (timeout.problem !== undefined) throw invalidField(timeout.problem, 'timeout');
    return timeout.seconds;
  }

  /** A regular file's bytes; `path` absolute or relative to the sandbox user's home. */
  readFile(id: string, path: string): Promise<Buffer> {
    return this.withAgent(id, (agent) => readSandboxFile(agent, filePath(path), this.runtime.config.sandboxes.maxFileBytes));
  }

  /**
   * Writes a file (parents made, a file there replaced); with `append`, `content` goes on the end
   * of the file (a slice after the first) instead.
   */
  writeFile(id: string, path: string, content: Buffer, append = false): Promise<SandboxFileWritten> {
    return this.withAgent(id, (agent) => writeSandboxFile(agent, filePath(path), content, this.runtime.config.sandboxes.maxFileBytes, { append }));
  }

  /** The ids of the running sandboxes. */
  runningIds(): string[] {
    return [...this.table.sandboxes.values()].filter((sandbox) => sandbox.running).map((sandbox) => sandbox.id);
  }

  /** A running sandbox's agent and what guards it, or undefined when there is none by that id. */
  access(id: string): SandboxAccess | undefined {
    const sandbox = this.table.sandboxes.get(id);
    if (!sandbox?.running) return undefined;
    return {
      agent: sandbox.agent,
      accessToken: sandbox.accessToken,
      home: SANDBOX_HOME,
      rootInside: sandbox.rootInside,
      defaultUser: SANDBOX_USER,
      python: sandbox.python,
      ...(sandbox.apiKey !== undefined && { apiKey: sandbox.apiKey }),
      trafficToken: sandbox.trafficToken,
      maskRequestHost: sandbox.maskRequestHost,
      connectPort: (port) => sandbox.connectPort(port),
    };
  }

  /**
   * Kills every sandbox (the process is stopping); new ones are refused. Paused ones stay on disk.
   * A change under way (a pause ending its sandbox, a fork or resume starting one) fails or ends
   * with them, and is waited for: what it ends is released, what it started is killed too, before
   * this resolves (the process may exit next, leaving no mount behind).
   */
  async close(): Promise<void> {
    this.closed = true;
    this.kept.stop();
    const endAll = () => Promise.all([...this.table.sandboxes.values(), ...this.helpers].map((sandbox) => sandbox.end('the server stopped')));
    await endAll();
    await this.kept.changesEnded();
    await endAll();
    await this.captures.close();
  }

  /**
   * A sandbox of the host's own, for work it does in one (a volume's files): not counted against
   * sandboxes.max, not listed, not reachable by envd; the caller ends it, and close() ends it too.
   */
  async startHelper(request: SandboxCreateRequest): Promise<LiveSandbox> {
    if (this.closed) throw new CodedError(contractError('queue.closed', 'the service is shutting down'));
    const plan = await this.planner.plan({ ...request, secure: false, allow_internet_access: false });
    const helper = await this.startSlots(plan.backend.kind).run(() => LiveSandbox.start(plan, (ended) => this.helpers.delete(ended)));
    this.helpers.add(helper);
    // Closed meanwhile: close() ended what it found.
    if (this.closed) await helper.end('the server stopped');
    return helper;
  }

  /**
   * Starts a sandbox (counted against sandboxes.max) and, from a kept state, puts its files back
   * before anyone can reach it; a sandbox whose files could not be put back is ended, not handed out.
   * `identity` keeps a resumed sandbox's id, token and start.
   */
  private async launch(
    request: LaunchRequest,
    from: KeptState | null,
    identity?: SandboxIdentity,
    /** The place it takes, held already (a fork's parent coming back): counted there, not again. */
    heldPlace?: object,
    /** Whether it takes the state's disk (linked; the state goes once it runs), not a copy: a pause's, a fork's one copy. */
    takesDisk = from?.purpose === 'pause',
  ): Promise<LiveSandbox> {
    const settings = this.runtime.config.sandboxes;
    if (this.closed) throw new CodedError(contractError('queue.closed', 'the service is shutting down'));
    if (heldPlace === undefined && this.table.liveCount() + this.table.starting.size >= settings.max) {
      throw new CodedError(contractError('sandboxes.full', `${settings.max} sandboxes are running, the most this server allows; kill one or retry later`, { max: settings.max }), {
        retry_after_seconds: 5,
      });
    }
    const key = request.api_key;
    const keyCap = key === undefined ? null : (this.runtime.config.service.apiKeys[key]?.maxSandboxes ?? null);
    if (
      heldPlace === undefined &&
      key !== undefined &&
      keyCap !== null &&
      this.table.liveCount(key) + [...this.table.starting.values()].filter((starting) => starting === key).length >= keyCap
    ) {
      throw keyFullError(key, keyCap);
    }
    const starting = heldPlace ?? {};
    this.table.starting.set(starting, key);
    let id: string | undefined;
    try {
      const plan = {
        ...(await this.planner.plan(request)),
        ...(identity && { id: identity.id, accessToken: identity.accessToken, startedAt: new Date(identity.startedAt) }),
        ...(from && this.kept.planFrom(from, takesDisk)),
      };
      id = plan.id;
      if (plan.volumes?.length)
        this.table.startingVolumes.set(
          id,
          plan.volumes.map((volume) => volume.id),
        );
      this.endings.set(id, new AbortController());
      // Its timeout counts from when it is handed out: while its files are put back (within the
      // pause deadline) it is not yet anyone's.
      const restoring = from ? settings.pauseTimeoutSeconds * 1000 : 0;
      const sandbox = await this.startSlots(plan.backend.kind).run(() =>
        LiveSandbox.start(
          { ...plan, timeoutMs: plan.timeoutMs + restoring },
          (ended) => this.forgetLater(ended),
          (expired) =>
            void this.pause(expired.id, plan.onTimeoutKeepMemory === undefined ? {} : { keep_memory: plan.onTimeoutKeepMemory }).catch(() =>
              expired.end('its timeout passed, and pausing it failed'),
            ),
        ),
      );
      if (plan.onTimeoutKeepMemory === true && sandbox.pauseKind !== 'memory') {
        await sandbox.end('its pause at the timeout could not keep memory');
        throw new CodedError(
          contractError(
            'sandbox.pause_unsupported',
            `a sandbox on ${sandbox.describe().backend} here keeps a paused sandbox's files only, not its processes' memory: leave on_timeout_keep_memory out or false`,
            {
              kept: sandbox.pauseKind,
            },
          ),
        );
      }
      // Back under its own id with its memory: its code-interpreter contexts go on.
      if (from?.kept === 'memory' && identity) this.codeContexts.resumed(sandbox.id, sandbox.agent);
      if (from) {
        // Memory comes back with its files: the backend put them back before its processes.
        if (from.kept === 'files' && from.files !== 'disk') await this.kept.restoreHome(sandbox, from);
        sandbox.setTimeout(plan.timeoutMs);
      }
      // Its memory kept, the start command's process came back with it.
      if (plan.image && from?.kept !== 'memory') await this.runStart(sandbox, plan.template);
      this.table.sandboxes.set(sandbox.id, sandbox);
      return sandbox;
    } catch (error) {
      if (id !== undefined && !this.table.sandboxes.has(id)) this.endings.delete(id);
      throw error;
    } finally {
      if (heldPlace === undefined) this.table.starting.delete(starting);
      if (id !== undefined) this.table.startingVolumes.delete(id);
    }
  }

  /**
   * The starts of a backend's sandboxes that run at once; the others wait their turn, first come
   * first served. A start is mostly CPU (forks of this process, bwrap's namespaces, a work dir's
   * file system) and some waiting on its processes. A burst of creates all started together
   * shares the cores until the last, and every one answers near the end; a few at a time, the
   * first answer early and the last no later. 100 at once on 2 cores (bench/burst.bench.ts, runs
   * taking turns): p50 4.8-6.0 s and p99 5.6-7.0 s all at once, 3.1 s and 5.9-6.5 s sixteen at
   * a time; four at a time left the cores idle while starts waited (p99 7.7-8.9 s).
   */
  private startSlots(kind: string): Semaphore {
    let slots = this.starts.get(kind);
    if (!slots) this.starts.set(kind, (slots = new Semaphore(8 * availableParallelism())));
    return slots;
  }

  /** Its template's start command, if it has one, and the wait for its ready command; a sandbox that does not become ready is killed. */
  private async runStart(sandbox: LiveSandbox, template: string): Promise<void> {
    const made = this.planner.imageTemplates.get(template);
    if (!made?.start) return;
    const root = made.config.user !== null && ['root', '0'].includes(made.config.user.split(':')[0]!);
    try {
      await runTemplateStart(made.start, {
        sandboxId: sandbox.id,
        agent: sandbox.agent,
        user: root ? 'root' : 'user',
        cwd: made.config.workingDir ?? undefined,
        deadlineMs: this.runtime.config.templates.readyTimeoutSeconds * 1000,
        ended: this.endings.get(sandbox.id)!.signal,
      });
    } catch (error) {
      await sandbox.end("its template's start command did not become ready");
      throw error;
    }
  }

  /**
   * `work` with the agent of running sandbox `id` (sandbox.not_found, sandbox.ended otherwise; an
   * end under it is sandbox.ended too).
   */
  async withAgent<T>(id: string, work: (agent: SandboxAgentPort) => Promise<T>): Promise<T> {
    const sandbox = this.table.find(id);
    if (!sandbox.running) throw sandbox.endedError();
    try {
      return await work(sandbox.agent);
    } catch (error) {
      if (!(error instanceof SandboxGoneError)) throw error;
      throw sandbox.running ? new CodedError(contractError('sandbox.ended', error.message)) : sandbox.endedError();
    }
  }

  private forgetLater(sandbox: LiveSandbox): void {
    sandboxDuration.observe({ backend: sandbox.describe().backend }, sandbox.runSeconds);
    this.endings.get(sandbox.id)?.abort();
    this.endings.delete(sandbox.id);
    this.codeContexts.sandboxEnded(sandbox.id);
    this.onEnded(sandbox.id);
    // Only this one: a paused sandbox may be running again under the same id by then.
    setTimeout(() => {
      if (this.table.sandboxes.get(sandbox.id) === sandbox) this.table.sandboxes.delete(sandbox.id);
    }, this.runtime.config.sandboxes.endedRetentionSeconds * 1000).unref();
  }

  /** The templates a create may name: the configuration's (the host's system) and those made of images. */
  templates(): Promise<Template[]> {
    return this.planner.templates();
  }

  /** The sandboxes that mount the volume `id`, running or being started. */
  volumeUsers(id: string): string[] {
    return this.table.volumeUsers(id);
  }
}

/** A refusal of the code interpreter (E2B's statuses) as our contract's error. */
function contextRefusal(error: ContextError): CodedError {
  const code = (
    { 400: 'validation.invalid_request', 404: 'sandbox.context_not_found', 429: 'sandbox.contexts_full', 500: 'sandbox.interpreter_failed', 502: 'sandbox.ended' } as const
  )[error.status];
  return new CodedError(contractError(code, error.message));
}

function filePath(path: string): string {
  if (path === '') throw invalidField('path: give the file’s path, absolute or relative to the home directory', 'path');
  return path;
}
