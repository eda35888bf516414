import { randomBytes, randomInt } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { join, posix } from 'node:path';
import type { Duplex } from 'node:stream';
import { environmentProblem } from '../contract/command-limits.js';
import { CodedError, contractError } from '../contract/errors.js';
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
import { CodeContexts, ContextError } from '../interpreter/code-contexts.js';
import { BridgeLost } from '../interpreter/kernel-bridge.js';
import { MAX_CELL_RESULT_BYTES, runCell } from '../interpreter/run-cell.js';
import { python } from '../languages/python.js';
import { isMissing } from '../languages/toolchain.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import type { SandboxBackend, SandboxNetwork } from '../isolation/types.js';
import { ANY_NAME } from '../egress/domain-rule.js';
import { templateNames, templateSettings } from './templates.js';
import { runTemplateStart } from './template-start.js';
import { imageEnvironment } from '../images/image-manifest.js';
import type { Template } from '../contract/templates.js';
import { openTemplateRegistry, type TemplateRegistry } from '../templates/template-registry.js';
import { Semaphore } from '../util/semaphore.js';
import type { ImageTemplate } from '../templates/image-template.js';
import { SandboxGoneError, type SandboxAgentPort } from './agent-port.js';
import { refusedHere } from './served-sandbox.js';
import { checkDesktop, DESKTOP_TEMPLATE } from './desktop-template.js';
import { LiveSandbox, SANDBOX_HOME, SANDBOX_USER, type PlannedVolume, type SandboxPlan } from './live-sandbox.js';
import type { VolumeStore } from '../volumes/volume-store.js';
import type { VolumeMount } from '../contract/volumes.js';
import { runToEnd } from './sandbox-exec.js';
import { readSandboxFile, writeSandboxFile } from './sandbox-files.js';
import { packHome, unpackHome, type ArchiveRun } from './home-archive.js';
import { keyFullError, sandboxNotFound, snapshotNotFound } from './sandbox-host.js';
import { describeSnapshot, expired, SnapshotStore, type KeptState } from './snapshot-store.js';
import { sandboxDuration } from '../util/metrics.js';
import { frozen } from './frozen-processes.js';
import { keptQuotaOf } from '../config/schema.js';
import { visibleTo } from '../util/tenant.js';

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
  private readonly sandboxes = new Map<string, LiveSandbox>();
  /** The host's own sandboxes (startHelper), running. */
  private readonly helpers = new Set<LiveSandbox>();
  /** Aborted when a sandbox ends: what waits on its agent (exec) stops waiting. */
  private readonly endings = new Map<string, AbortController>();
  /** The API key (undefined: the service token) of each sandbox being started. */
  private readonly starting = new Map<object, string | undefined>();
  private closed = false;
  /** The code-interpreter contexts of these sandboxes (port 49999 and run_code). */
  readonly codeContexts = new CodeContexts();
  /** Paused sandboxes' states and snapshots, on disk under the state dir, by id. */
  private readonly kept = new Map<string, KeptState>();
  /** Pauses and snapshots of API keys being kept now: counted against their keys' quotas. */
  private readonly keeping = new Set<{ apiKey: string; purpose: 'pause' | 'snapshot' }>();
  private readonly store: SnapshotStore;
  private readonly loaded: Promise<void>;
  /** Sandboxes being paused, resumed, forked or snapshotted (one such change at a time each), and when each change ends. */
  private readonly changing = new Map<string, Promise<void>>();
  private readonly sweeper: NodeJS.Timeout;
  /** Freezes idle sandboxes (sandboxes.freezeIdleSeconds), where set. */
  private readonly freezer: NodeJS.Timeout | undefined;
  private freezing = false;
  /** Sandboxes a pause is keeping (described(): paused once it has ended them). */
  private readonly pausing = new Set<string>();
  private imageTemplatesOpened: TemplateRegistry | null = null;
  /** Resumes under way because requests came for a paused sandbox (wake). */
  private readonly waking = new Map<string, Promise<boolean>>();
  /** Templates captured once ready (templateCapture), by template, image and backend; null: it could not be. */
  private readonly captures = new Map<string, Promise<KeptState | null>>();
  /** The sandbox starts each backend kind runs at once (startSlots). */
  private readonly starts = new Map<string, Semaphore>();

  constructor(
    private readonly runtime: RunnerRuntime,
    /** Told when a sandbox has ended, so what serves it (envd) forgets it. */
    private readonly onEnded: (id: string) => void = () => undefined,
    /** The volumes its sandboxes may mount; none where absent. */
    readonly volumes: VolumeStore | null = null,
  ) {
    this.store = new SnapshotStore(runtime.config.sandboxes.keptDir ?? join(runtime.config.stateDir, 'sandboxes', 'kept'));
    this.loaded = this.store.load(this.retentionMs()).then((states) => {
      for (const state of states) this.kept.set(state.id, state);
    });
    // Made at start, swept hourly: a paused sandbox or snapshot is kept keptRetentionDays.
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS).unref();
    // Looked at twice an idle period: one idle for it since the look before is frozen.
    const idleMs = runtime.config.sandboxes.freezeIdleSeconds * 1000;
    this.freezer = idleMs > 0 ? setInterval(() => void this.freezeIdle(idleMs), idleMs / 2).unref() : undefined;
  }

  /**
   * Starts a sandbox, from a template or a snapshot, for the API key named `apiKey` (undefined: the
   * service token); throws CodedError (validation, template.not_found, sandboxes.full,
   * sandboxes.key_full, backend.*). Another key's snapshot is no template of this key's.
   */
  async create(request: SandboxCreateRequest, apiKey?: string): Promise<Sandbox> {
    await this.loaded;
    const snapshot = this.snapshotFor(request.template, apiKey);
    const owned: LaunchRequest = {
      ...request,
      ...(apiKey !== undefined && { api_key: apiKey }),
      ...(snapshot === undefined && { imageTemplate: await this.imageTemplateOf(request.template ?? 'base') }),
    };
    const from = snapshot ?? (await this.templateCapture(owned));
    const sandbox = from ? await this.launch(fromState(from, owned), from) : await this.launch(owned, null);
    return sandbox.describe(true);
  }

  /**
   * E2B's model of a template with a start command, where the backend keeps memory: its sandboxes
   * start from one captured once its ready command succeeded, the start command's processes
   * running already. The first create of the template (its image, on the backend) makes it: a
   * sandbox of its own, kept whole as a fork's state is, then ended; one replaced by a new image
   * goes. Captures live as long as this process. Elsewhere, or where the capture failed (null),
   * each sandbox runs the start command itself.
   */
  private async templateCapture(request: LaunchRequest): Promise<KeptState | null> {
    const made = request.imageTemplate;
    if (!made?.start) return null;
    let backend;
    try {
      backend = this.runtime.backends.get(request.backend?.kind);
    } catch {
      return null;
    }
    if (backend.capabilities.pause !== 'memory') return null;
    const key = `${made.name} ${backend.kind} ${made.image}`;
    let capture = this.captures.get(key);
    if (!capture) {
      for (const [older, state] of this.captures) {
        if (!older.startsWith(`${made.name} ${backend.kind} `)) continue;
        this.captures.delete(older);
        void state.then((kept) => kept && this.store.remove(kept.id)).catch(() => undefined);
      }
      capture = this.capture(made.name, backend.kind).catch(() => null);
      this.captures.set(key, capture);
    }
    return capture;
  }

  /** A sandbox of template `name` on `kind` started (its start command ready), kept whole, and ended. */
  private async capture(name: string, kind: string): Promise<KeptState> {
    const sandbox = await this.launch({ template: name, backend: { kind } }, null);
    try {
      // A backend that keeps memory may not for a sandbox on an image (gVisor's): then none is captured.
      if (sandbox.pauseKind !== 'memory') throw new Error(`a sandbox of ${name} on ${kind} keeps no memory`);
      return await this.changingWhile(sandbox.id, () => this.keep(sandbox, { id: randomId(), purpose: 'fork', name: null }, 'memory'));
    } finally {
      this.sandboxes.delete(sandbox.id);
      await sandbox.end('captured as its template');
    }
  }

  async describe(id: string): Promise<Sandbox> {
    await this.loaded;
    const paused = this.pausedState(id);
    return paused ? describePaused(paused) : this.described(this.find(id));
  }

  /** Running, paused and recently ended sandboxes. */
  async list(): Promise<Sandbox[]> {
    await this.loaded;
    const paused = [...this.kept.values()].filter((state) => state.purpose === 'pause').map(describePaused);
    return [...[...this.sandboxes.values()].map((sandbox) => this.described(sandbox)), ...paused];
  }

  /**
   * A sandbox as it is; one its pause has ended whose state is still being written (its disk
   * moved aside, its checkpoint's files synced) is paused already, not ended: a client polling
   * for its pause never sees it gone.
   */
  private described(sandbox: LiveSandbox): Sandbox {
    const described = sandbox.describe();
    return this.pausing.has(sandbox.id) && !sandbox.running ? { ...described, state: 'paused' } : described;
  }

  /**
   * Pauses a running sandbox: its home is kept under the state dir (its processes frozen while it
   * is packed, so the files are those of one instant), then the sandbox ends and holds nothing on
   * the host, no process, memory or mount, until resume. `keep_memory: true` is refused where the
   * backend keeps files only. On a failure before it is saved the sandbox is left running as it
   * was; a checkpoint past its deadline ends it (the backend may be past undoing it), and one
   * whose state then cannot be written whole (a full disk) is lost with it: both say why.
   */
  async pause(id: string, request: SandboxPauseRequest = {}): Promise<Sandbox> {
    await this.loaded;
    if (this.pausedState(id)) throw new CodedError(contractError('sandbox.paused', `sandbox ${id} is already paused`));
    const sandbox = this.running(id);
    if (request.keep_memory === true && sandbox.pauseKind !== 'memory') {
      throw new CodedError(
        contractError(
          'sandbox.pause_unsupported',
          `sandbox ${id} on ${sandbox.describe().backend} can keep its files only, not its processes' memory: its backend cannot here (see /v1/backends), or not with what the sandbox has (egress)`,
          {
            kept: sandbox.pauseKind,
          },
        ),
      );
    }
    // As much as its backend keeps, unless the request asks for files only.
    const memory = sandbox.pauseKind === 'memory' && request.keep_memory !== false;
    await this.withinKeptQuota(sandbox.apiKey, 'pause', null, () =>
      this.changingWhile(id, async () => {
        this.pausing.add(id);
        try {
          const state = await this.keep(sandbox, { id, purpose: 'pause', name: null }, memory ? 'memory' : 'end');
          this.kept.set(id, state);
        } finally {
          this.pausing.delete(id);
        }
        this.sandboxes.delete(id);
        await sandbox.end('paused');
      }),
    );
    return describePaused(this.kept.get(id)!);
  }

  /**
   * Resumes a paused sandbox under its own id and access token, its files as they were; a
   * running one is left as it is. `resumed` says which. On failure it stays paused.
   */
  async resume(id: string, timeoutSeconds?: number): Promise<{ sandbox: Sandbox; resumed: boolean }> {
    await this.loaded;
    // A pause still ending (one at its timeout, say) is finished first: the sandbox is listed as
    // paused from the moment it is kept, and a client that saw it so connects at once.
    await this.changing.get(id);
    const state = this.pausedState(id);
    if (!state) return { sandbox: this.connect(id, timeoutSeconds), resumed: false };
    return this.changingWhile(id, async () => {
      const request = fromState(state, { ...(timeoutSeconds === undefined ? {} : { timeout_seconds: timeoutSeconds }), secure: state.sandbox.access_token !== null });
      const sandbox = await this.launch(request, state, { id, accessToken: state.sandbox.access_token, startedAt: state.sandbox.started_at });
      this.kept.delete(id);
      await this.store.remove(id);
      return { sandbox: sandbox.describe(true), resumed: true };
    });
  }

  /**
   * Resumes a paused sandbox that asked to be resumed by requests (auto_resume), as a connect
   * would; true when it runs now. Requests that come together wait for the one resume.
   */
  wake(id: string): Promise<boolean> {
    let waking = this.waking.get(id);
    if (!waking) {
      waking = this.wakeOnce(id).finally(() => this.waking.delete(id));
      this.waking.set(id, waking);
    }
    return waking;
  }

  private async wakeOnce(id: string): Promise<boolean> {
    await this.loaded;
    await this.changing.get(id);
    const state = this.pausedState(id);
    if (!state) return this.sandboxes.get(id)?.running === true;
    if (state.sandbox.auto_resume !== true) return false;
    try {
      await this.resume(id);
      return true;
    } catch {
      // It stays paused (a resume that fails leaves it so): the request is answered as for a sandbox not running.
      return false;
    }
  }

  /**
   * `count` copies of a running sandbox, each a sandbox of its own (own id, token, uid or VM,
   * cgroup) with the parent's files, and its processes with their memory where the backend keeps
   * memory; the parent is frozen only while it is kept, once for all copies, and keeps running.
   * Each copy is made or fails on its own.
   */
  async fork(id: string, request: SandboxForkRequest = {}): Promise<SandboxForkResult> {
    await this.loaded;
    const sandbox = this.running(id);
    const state = await this.changingWhile(id, () => this.keepRunning(sandbox, { id: randomId(), purpose: 'fork', name: null }));
    try {
      const copy = fromState(state, { ...(request.timeout_seconds === undefined ? {} : { timeout_seconds: request.timeout_seconds }) });
      // One copy takes the fork's state's disk, which goes after; several copy it each.
      const count = request.count ?? 1;
      const made = await Promise.allSettled(Array.from({ length: count }, () => this.launch(copy, state, undefined, undefined, count === 1)));
      return {
        kept: state.kept,
        forks: made.map((outcome) => (outcome.status === 'fulfilled' ? { sandbox: outcome.value.describe(true) } : { error: errorOf(outcome.reason) })),
      };
    } finally {
      await this.store.remove(state.id);
    }
  }

  /**
   * Keeps a running sandbox's state as a snapshot (a template of new sandboxes, by id or name);
   * the sandbox keeps running. The snapshot is its sandbox's key's, and so is its name: it
   * replaces the one of that key the name named before, never another key's.
   */
  async snapshot(id: string, request: SnapshotCreateRequest = {}): Promise<Snapshot> {
    await this.loaded;
    const sandbox = this.running(id);
    const name = request.name ?? null;
    const named = () => this.snapshots().filter((older) => name !== null && older.name === name && older.sandbox.api_key === sandbox.apiKey);
    const state = await this.withinKeptQuota(sandbox.apiKey, 'snapshot', named()[0]?.id ?? null, async () => {
      const kept = await this.changingWhile(id, () => this.keepRunning(sandbox, { id: randomId(), purpose: 'snapshot', name }));
      this.kept.set(kept.id, kept);
      return kept;
    });
    for (const older of named()) if (older.id !== state.id) await this.dropState(older.id);
    return describeSnapshot(state);
  }

  async listSnapshots(filter: { sandbox_id?: string; name?: string } = {}): Promise<Snapshot[]> {
    await this.loaded;
    return this.snapshots()
      .filter((state) => filter.sandbox_id === undefined || state.sandbox.id === filter.sandbox_id)
      .filter((state) => filter.name === undefined || state.name === filter.name || state.id === filter.name)
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id))
      .map(describeSnapshot);
  }

  /** Deletes a snapshot the key `apiKey` reaches by id or name (snapshotFor); sandboxes made from it are not touched. */
  async deleteSnapshot(idOrName: string, apiKey?: string): Promise<Snapshot> {
    await this.loaded;
    const state = this.snapshotFor(idOrName, apiKey);
    if (!state) throw snapshotNotFound(idOrName);
    await this.dropState(state.id);
    return describeSnapshot(state);
  }

  setTimeout(id: string, timeoutSeconds: number): Sandbox {
    const sandbox = this.find(id);
    const max = this.runtime.config.sandboxes.maxTimeoutSeconds;
    if (timeoutSeconds > max) throw invalid(`timeout must be at most ${max} seconds, got ${timeoutSeconds}`, 'timeout');
    sandbox.setTimeout(timeoutSeconds * 1000);
    return sandbox.describe();
  }

  connect(id: string, timeoutSeconds?: number): Sandbox {
    const sandbox = this.running(id);
    if (timeoutSeconds !== undefined && Date.now() + timeoutSeconds * 1000 > Date.parse(sandbox.describe().end_at)) this.setTimeout(id, timeoutSeconds);
    return sandbox.describe(true);
  }

  metrics(id: string): Promise<SandboxMetrics> {
    return this.find(id).metrics();
  }

  /** Kills a sandbox; a paused one's kept state is deleted. */
  async kill(id: string): Promise<Sandbox> {
    await this.loaded;
    const paused = this.pausedState(id);
    if (paused) {
      if (this.changing.has(id)) throw busy(id);
      await this.dropState(id);
      return { ...describePaused(paused), state: 'ended', ended_reason: 'killed while paused' };
    }
    // Being kept (a fork or snapshot of one that keeps memory ends it and brings it back): after that.
    if (this.changing.has(id)) throw busy(id);
    const sandbox = this.find(id);
    await sandbox.end('killed');
    return sandbox.describe();
  }

  /** Runs a command to its end (sandbox-exec.ts), its timeout and output caps a snippet's. */
  exec(id: string, request: SandboxExecRequest): Promise<SandboxExecResult> {
    const limits = this.runtime.config.snippet;
    const timeoutSeconds = request.timeout ?? limits.defaultTimeoutSeconds;
    if (timeoutSeconds > limits.maxTimeoutSeconds) throw invalid(`timeout must be at most ${limits.maxTimeoutSeconds} seconds, got ${timeoutSeconds}`, 'timeout');
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
    const timeoutSeconds = request.timeout ?? limits.defaultTimeoutSeconds;
    if (timeoutSeconds > limits.maxTimeoutSeconds) throw invalid(`timeout must be at most ${limits.maxTimeoutSeconds} seconds, got ${timeoutSeconds}`, 'timeout');
    const sandbox = this.find(id);
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

  /** A regular file's bytes; `path` absolute or relative to the sandbox user's home. */
  readFile(id: string, path: string): Promise<Buffer> {
    return this.withAgent(id, (agent) => readSandboxFile(agent, filePath(path), this.runtime.config.sandboxes.maxFileBytes));
  }

  /** Writes a file (parents made, a file there replaced). */
  /** `append`: `content` goes on the end of the file (a slice after the first), instead of replacing it. */
  writeFile(id: string, path: string, content: Buffer, append = false): Promise<SandboxFileWritten> {
    return this.withAgent(id, (agent) => writeSandboxFile(agent, filePath(path), content, this.runtime.config.sandboxes.maxFileBytes, { append }));
  }

  /** A running sandbox's agent and what guards it, or undefined when there is none by that id. */
  /** The ids of the running sandboxes. */
  runningIds(): string[] {
    return [...this.sandboxes.values()].filter((sandbox) => sandbox.running).map((sandbox) => sandbox.id);
  }

  access(id: string): SandboxAccess | undefined {
    const sandbox = this.sandboxes.get(id);
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
    clearInterval(this.sweeper);
    clearInterval(this.freezer);
    const endAll = () => Promise.all([...this.sandboxes.values(), ...this.helpers].map((sandbox) => sandbox.end('the server stopped')));
    await endAll();
    await Promise.all(this.changing.values());
    await endAll();
    // Templates captured by this process are its own: they go with it.
    await Promise.all([...this.captures.values()].map((capture) => capture.then((kept) => kept && this.store.remove(kept.id)).catch(() => undefined)));
  }

  /**
   * A sandbox of the host's own, for work it does in one (a volume's files): not counted against
   * sandboxes.max, not listed, not reachable by envd; the caller ends it, and close() ends it too.
   */
  async startHelper(request: SandboxCreateRequest): Promise<LiveSandbox> {
    if (this.closed) throw new CodedError(contractError('queue.closed', 'the service is shutting down'));
    const plan = await this.plan({ ...request, secure: false, allow_internet_access: false });
    const helper = await this.startSlots(plan.backend.kind).run(() => LiveSandbox.start(plan, (ended) => this.helpers.delete(ended)));
    this.helpers.add(helper);
    // Closed meanwhile: close() ended what it found.
    if (this.closed) await helper.end('the server stopped');
    return helper;
  }

  /** Running sandboxes: all, or those of one API key. */
  private liveCount(apiKey?: string): number {
    let live = 0;
    for (const sandbox of this.sandboxes.values()) if (sandbox.running && (apiKey === undefined || sandbox.apiKey === apiKey)) live += 1;
    return live;
  }

  private find(id: string): LiveSandbox {
    const found = this.sandboxes.get(id);
    if (found) return found;
    if (this.pausedState(id)) throw new CodedError(contractError('sandbox.paused', `sandbox ${id} is paused: resume it first`));
    throw sandboxNotFound(id);
  }

  private running(id: string): LiveSandbox {
    const sandbox = this.find(id);
    if (!sandbox.running) throw sandbox.endedError();
    return sandbox;
  }

  private pausedState(id: string): KeptState | undefined {
    const state = this.kept.get(id);
    return state?.purpose === 'pause' ? state : undefined;
  }

  private snapshots(): KeptState[] {
    return [...this.kept.values()].filter((state) => state.purpose === 'snapshot');
  }

  /**
   * The snapshot a template names for the key `apiKey` (undefined: the service token): by id, one
   * the key sees (the token: any); by name, the key's own, names being each key's. None for a
   * template of the configuration.
   */
  private snapshotFor(template: string | undefined, apiKey: string | undefined): KeptState | undefined {
    if (template === undefined || templateSettings(this.runtime.config.sandboxes, template) !== null) return undefined;
    const state = this.kept.get(template);
    if (state?.purpose === 'snapshot' && visibleTo(apiKey, state.sandbox.api_key)) return state;
    return this.snapshots().find((snapshot) => snapshot.name === template && snapshot.sandbox.api_key === apiKey);
  }

  /**
   * Keeps a state (`keep`) for the key `apiKey` within what it may keep (service.apiKeys, over
   * KEY_KEPT_DEFAULTS): its paused sandboxes or snapshots, those being kept meanwhile counted
   * too, and the bytes of those kept, without the snapshot the new one replaces. The service
   * token's are not capped.
   */
  private async withinKeptQuota<T>(apiKey: string | undefined, purpose: 'pause' | 'snapshot', replaces: string | null, keep: () => Promise<T>): Promise<T> {
    if (apiKey === undefined) return keep();
    const quota = keptQuotaOf(this.runtime.config.service, apiKey);
    const held = [...this.kept.values()].filter((state) => state.sandbox.api_key === apiKey && state.id !== replaces);
    const count = held.filter((state) => state.purpose === purpose).length + [...this.keeping].filter((being) => being.apiKey === apiKey && being.purpose === purpose).length;
    const cap = purpose === 'pause' ? quota.maxPausedSandboxes : quota.maxSnapshots;
    if (cap !== null && count >= cap) throw keptFullError(apiKey, purpose, cap);
    const bytes = held.reduce((sum, state) => sum + state.bytes, 0);
    if (quota.maxKeptBytes !== null && bytes >= quota.maxKeptBytes) {
      throw new CodedError(
        contractError(
          'sandboxes.key_kept_bytes_full',
          `API key ${apiKey} keeps ${bytes} bytes of paused sandboxes and snapshots, the most it may is ${quota.maxKeptBytes}; delete some first`,
          {
            max_bytes: quota.maxKeptBytes,
            kept_bytes: bytes,
          },
        ),
      );
    }
    const being = { apiKey, purpose };
    this.keeping.add(being);
    try {
      return await keep();
    } finally {
      this.keeping.delete(being);
    }
  }

  private async changingWhile<T>(id: string, change: () => Promise<T>): Promise<T> {
    if (this.changing.has(id)) throw busy(id);
    let ended!: () => void;
    this.changing.set(id, new Promise<void>((resolve) => (ended = resolve)));
    try {
      return await change();
    } finally {
      this.changing.delete(id);
      ended();
    }
  }

  /**
   * Keeps a running sandbox's home under the state dir, its processes frozen (SIGSTOP) while it
   * is packed so that its files are of one instant. Then: `thaw` lets them go on (a fork's
   * parent, a snapshot's); `end` leaves them stopped for the end that follows (a pause of its
   * files); `memory` saves them, stopped, with their memory (its backend's checkpoint), which
   * ends the sandbox (a pause that keeps memory; a resume lets them go on); `memory-running`
   * saves them so and lets them go on (a fork's or snapshot's parent, where the backend can).
   */
  private async keep(sandbox: LiveSandbox, as: Pick<KeptState, 'id' | 'purpose' | 'name'>, then: 'thaw' | 'end' | 'memory' | 'memory-running'): Promise<KeptState> {
    const settings = this.runtime.config.sandboxes;
    const deadlineMs = settings.pauseTimeoutSeconds * 1000;
    const withMemory = then === 'memory' || then === 'memory-running';
    // Keeping memory, only this keeping reaches the agent from the start: a file written or a
    // process started meanwhile would be in the memory kept but not in its home.
    const hold = withMemory ? sandbox.hold() : null;
    const agent = hold?.port ?? sandbox.agent;
    // Where its backend keeps its disk, its files (its home, its root's changes) are that disk:
    // kept where it is (a pause) or copied (a fork's, a snapshot's), never packed; a checkpoint
    // then holds its memory only.
    const onDisk = sandbox.keepsDisk;
    try {
      return await this.store.write(async (into) => {
        const record = { ...as, created_at: new Date().toISOString(), sandbox: sandbox.keptAs(), ...(onDisk && { files: 'disk' as const }) };
        if (onDisk && then === 'end') {
          await sandbox.endKeepingDisk(into.disk, 'paused');
          return { ...record, kept: 'files' as const };
        }
        const run: ArchiveRun = { agent, python: sandbox.python, home: sandbox.home, deadlineMs };
        await frozen(agent, then === 'thaw' || then === 'memory-running', async () => {
          // A tar of a full home is a little over its size: headers, and padding to 512 bytes a
          // file. Left empty where the checkpoint holds the files itself, or its disk is kept.
          if (onDisk && then !== 'memory') await sandbox.copyDisk(into.disk);
          else if (!onDisk && (!withMemory || !sandbox.checkpointHoldsFiles)) await packHome(run, into.home, 2 * settings.homeBytes);
          if (hold && then === 'memory-running') {
            await sandbox.checkpointRunning(into.memory, hold, deadlineMs);
          } else if (hold) {
            // Its code-interpreter contexts' kernels are kept with it: they wait for it.
            this.codeContexts.suspend(sandbox.id);
            try {
              await sandbox.checkpoint(into.memory, hold, deadlineMs, onDisk ? into.disk : undefined);
            } catch (error) {
              this.codeContexts.resumed(sandbox.id, sandbox.running ? sandbox.agent : null);
              throw error;
            }
          }
        });
        return { ...record, kept: withMemory ? ('memory' as const) : ('files' as const) };
      });
    } catch (error) {
      hold?.release();
      // Saved, then its state could not be written whole: it is gone, and its contexts with it.
      if (hold && !sandbox.running) this.codeContexts.resumed(sandbox.id, null);
      throw keepFailure(sandbox.id, error);
    }
  }

  /**
   * Keeps a sandbox that goes on running (a fork's parent, a snapshot's sandbox): with its memory
   * where the backend keeps it, saved while it runs where the backend can; otherwise its
   * checkpoint ends the sandbox, so it comes back from the state at once, under its own id, token
   * and timeout, its processes where they were (clients following one follow it again).
   * Otherwise its files, its processes frozen only meanwhile.
   */
  private async keepRunning(sandbox: LiveSandbox, as: Pick<KeptState, 'id' | 'purpose' | 'name'>): Promise<KeptState> {
    if (sandbox.pauseKind !== 'memory') return this.keep(sandbox, as, 'thaw');
    // A backend that saves it and leaves it running: it never goes away.
    if (sandbox.checkpointsRunning) return this.keep(sandbox, as, 'memory-running');
    const endsAt = Date.parse(sandbox.describe().end_at);
    // Its place is held while it is away: a create meanwhile must not take the one it comes back to.
    const place = {};
    this.starting.set(place, sandbox.apiKey);
    try {
      const state = await this.keep(sandbox, as, 'memory');
      const left = Math.max(1, Math.ceil((endsAt - Date.now()) / 1000));
      const identity = { id: sandbox.id, accessToken: sandbox.accessToken, startedAt: state.sandbox.started_at };
      try {
        await this.launch(fromState(state, { timeout_seconds: left, secure: sandbox.accessToken !== null }), state, identity, place);
      } catch (error) {
        // Not lost: what was kept of it becomes its paused state, to resume.
        this.kept.set(sandbox.id, await this.store.repurpose(state, { id: sandbox.id, purpose: 'pause', name: null }));
        const why = error instanceof Error ? error.message : String(error);
        throw new CodedError(contractError('sandbox.pause_failed', `sandbox ${sandbox.id} was kept but could not come back (${why}); it is paused: resume it`));
      }
      return state;
    } finally {
      this.starting.delete(place);
    }
  }

  private async dropState(id: string): Promise<void> {
    // A paused sandbox's contexts waited for it: it will not come back.
    this.codeContexts.resumed(id, null);
    this.kept.delete(id);
    await this.store.remove(id);
  }

  /** Freezes each running sandbox idle for `idleMs` (LiveSandbox.freezeIfIdle); not one being paused, forked or snapshotted. */
  private async freezeIdle(idleMs: number): Promise<void> {
    // One look at a time: a freeze may wait a while for its processes to stop.
    if (this.freezing) return;
    this.freezing = true;
    try {
      for (const sandbox of [...this.sandboxes.values()]) {
        if (!this.changing.has(sandbox.id)) await sandbox.freezeIfIdle(idleMs).catch(() => undefined);
      }
    } finally {
      this.freezing = false;
    }
  }

  private async sweep(): Promise<void> {
    for (const state of [...this.kept.values()]) if (!this.changing.has(state.id) && expired(state, this.retentionMs())) await this.dropState(state.id);
  }

  private retentionMs(): number {
    return this.runtime.config.sandboxes.keptRetentionDays * 24 * 3600 * 1000;
  }

  /**
   * Starts a sandbox (counted against sandboxes.max) and, from a kept state, puts its files back
   * before anyone can reach it; a sandbox whose files could not be put back is ended, not handed out.
   * `identity` keeps a resumed sandbox's id, token and start.
   */
  private async launch(
    request: LaunchRequest,
    from: KeptState | null,
    identity?: { id: string; accessToken: string | null; startedAt: string },
    /** The place it takes, held already (a fork's parent coming back): counted there, not again. */
    heldPlace?: object,
    /** Whether it takes the state's disk (linked; the state goes once it runs), not a copy: a pause's, a fork's one copy. */
    takesDisk = from?.purpose === 'pause',
  ): Promise<LiveSandbox> {
    const settings = this.runtime.config.sandboxes;
    if (this.closed) throw new CodedError(contractError('queue.closed', 'the service is shutting down'));
    if (heldPlace === undefined && this.liveCount() + this.starting.size >= settings.max) {
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
      this.liveCount(key) + [...this.starting.values()].filter((starting) => starting === key).length >= keyCap
    ) {
      throw keyFullError(key, keyCap);
    }
    const starting = heldPlace ?? {};
    this.starting.set(starting, key);
    let id: string | undefined;
    try {
      const plan = {
        ...(await this.plan(request)),
        ...(identity && { id: identity.id, accessToken: identity.accessToken, startedAt: new Date(identity.startedAt) }),
        // Its home and memory come back within the pause deadline, not a start's.
        ...(from?.kept === 'memory' && { resume: this.resumeOf(from), startTimeoutSeconds: Math.max(settings.startTimeoutSeconds, settings.pauseTimeoutSeconds) }),
        ...(from?.files === 'disk' && { fromDisk: { image: this.store.paths(from.id).disk, take: takesDisk } }),
      };
      id = plan.id;
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
        if (from.kept === 'files' && from.files !== 'disk') await this.restoreHome(sandbox, from);
        sandbox.setTimeout(plan.timeoutMs);
      }
      // Its memory kept, the start command's process came back with it.
      if (plan.image && from?.kept !== 'memory') await this.runStart(sandbox, plan.template);
      this.sandboxes.set(sandbox.id, sandbox);
      return sandbox;
    } catch (error) {
      if (id !== undefined && !this.sandboxes.has(id)) this.endings.delete(id);
      throw error;
    } finally {
      if (heldPlace === undefined) this.starting.delete(starting);
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
    const made = this.imageTemplates.get(template);
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

  private resumeOf(from: KeptState): NonNullable<SandboxPlan['resume']> {
    const { home, memory } = this.store.paths(from.id);
    return { image: memory, archive: home, agentVersion: from.sandbox.agent_version ?? null };
  }

  private async restoreHome(sandbox: LiveSandbox, from: KeptState): Promise<void> {
    const run: ArchiveRun = { agent: sandbox.agent, python: sandbox.python, home: sandbox.home, deadlineMs: this.runtime.config.sandboxes.pauseTimeoutSeconds * 1000 };
    const archive = await this.store.openHome(from.id);
    try {
      await unpackHome(run, archive);
    } catch (error) {
      await sandbox.end('its files could not be put back');
      throw keepFailure(sandbox.id, error);
    } finally {
      await archive.close();
    }
  }

  /** `work` on a running sandbox's agent; the sandbox ending under it answers sandbox.ended. */
  /**
   * `work` with the agent of running sandbox `id` (sandbox.not_found, sandbox.ended otherwise; an
   * end under it is sandbox.ended too).
   */
  async withAgent<T>(id: string, work: (agent: SandboxAgentPort) => Promise<T>): Promise<T> {
    const sandbox = this.find(id);
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
      if (this.sandboxes.get(sandbox.id) === sandbox) this.sandboxes.delete(sandbox.id);
    }, this.runtime.config.sandboxes.endedRetentionSeconds * 1000).unref();
  }

  /** The host's python, which a sandbox on the host's system runs its agent and kernels with. */
  private async hostPython(): Promise<SandboxPlan['python']> {
    const toolchain = await this.runtime.toolchains.get(python);
    if (isMissing(toolchain)) throw new CodedError(contractError('backend.unavailable', `sandboxes need python here: ${toolchain.message}`), { http_status: 503 });
    return { executable: toolchain.executable, mounts: toolchain.mounts };
  }

  /** The templates a create may name: the configuration's (the host's system) and those made of images. */
  async templates(): Promise<Template[]> {
    const host = templateNames(this.runtime.config.sandboxes).map((name): Template => ({ name, kind: 'host' }));
    return [...host, ...(await this.imageTemplates.listAll()).map((image): Template => ({ ...image, kind: 'image' }))];
  }

  /** The templates made of images, opened when a create first names a template not of the configuration. */
  private get imageTemplates(): TemplateRegistry {
    return (this.imageTemplatesOpened ??= openTemplateRegistry(this.runtime.config));
  }

  /** The template made of an image named `name` (a lookup that may ask the cluster's registry); null for one of the configuration's or none. */
  private async imageTemplateOf(name: string): Promise<ImageTemplate | null> {
    return templateSettings(this.runtime.config.sandboxes, name) === null ? await this.imageTemplates.lookup(name) : null;
  }

  private async plan(request: LaunchRequest): Promise<SandboxPlan> {
    const { config } = this.runtime;
    const settings = config.sandboxes;
    const template = request.template ?? 'base';
    const fromImage = request.imageTemplate !== undefined ? request.imageTemplate : await this.imageTemplateOf(template);
    const named = templateSettings(settings, template) ?? (fromImage && {});
    if (named === null) {
      const known = [...templateNames(settings), ...this.imageTemplates.list().map((image) => image.name)].join(', ');
      throw new CodedError(contractError('template.not_found', `no template ${JSON.stringify(template)}: this server has ${known}`, { template }));
    }
    const timeoutSeconds = request.timeout_seconds ?? settings.defaultTimeoutSeconds;
    if (timeoutSeconds > settings.maxTimeoutSeconds) throw invalid(`timeout must be at most ${settings.maxTimeoutSeconds} seconds, got ${timeoutSeconds}`, 'timeout');
    // The operator's word on the internet wins: E2B's SDK asks for it on every create by default.
    const allowed = named.allowInternetAccess ?? settings.allowInternetAccess;
    const internet = (request.allow_internet_access ?? allowed) && allowed && config.runJob.allowNetwork;
    let backend;
    try {
      backend = this.runtime.backends.get(request.backend?.kind ?? named.backend);
      if (template === DESKTOP_TEMPLATE && !fromImage) checkDesktop(backend);
    } catch (error) {
      throw refusedHere(error);
    }
    const network: SandboxNetwork = internet ? internetOn(backend) : 'none';
    const envVars = { ...named.envVars, ...request.env_vars };
    // Every process the sandbox runs gets these: bounded so that each still has room for its own.
    const environment = environmentProblem(envVars, 'env_vars');
    if (environment !== undefined) throw invalid(environment, 'env_vars');
    // Its ports ask for its access token: a sandbox without one cannot keep them to its clients.
    if (request.allow_public_traffic === false && request.secure === false)
      throw invalid('allow_public_traffic false needs a secure sandbox: its ports ask for its access token', 'allow_public_traffic');
    const volumes = await this.plannedVolumes(request.volume_mounts ?? [], request.api_key);
    return {
      id: randomId(),
      template,
      backend,
      python: fromImage ? IMAGE_PYTHON : await this.hostPython(),
      ...(fromImage && {
        image: { layers: await this.imageTemplates.layers(fromImage), writableBytes: config.templates.writableLayerBytes, env: imageEnvironment(fromImage.config.env) },
      }),
      envVars,
      metadata: request.metadata ?? {},
      network,
      timeoutMs: timeoutSeconds * 1000,
      accessToken: request.secure === false ? null : randomBytes(24).toString('base64url'),
      publicTraffic: request.allow_public_traffic !== false,
      maskRequestHost: request.mask_request_host ?? null,
      memoryBytes: named.memoryBytes ?? settings.memoryBytes,
      maxProcesses: settings.maxProcesses,
      maxOpenFiles: config.runJob.maxOpenFiles,
      cpuCores: named.cpuCores ?? config.runJob.cpuCores,
      home: SANDBOX_HOME,
      homeBytes: settings.homeBytes,
      maxFileBytes: settings.maxFileBytes,
      outputWindowBytes: settings.streams.outputWindowBytes,
      startTimeoutSeconds: settings.startTimeoutSeconds,
      heartbeatMs: settings.heartbeatSeconds * 1000,
      maxLifetimeMs: settings.maxTimeoutSeconds * 1000,
      onTimeout: request.on_timeout ?? 'kill',
      ...(request.on_timeout_keep_memory !== undefined && { onTimeoutKeepMemory: request.on_timeout_keep_memory }),
      ...(request.auto_resume === true && { autoResume: true }),
      ...(request.api_key !== undefined && { apiKey: request.api_key }),
      ...(volumes.length > 0 && { volumes }),
    };
  }

  /** The volumes a create names, the key's own, each mounted on the host, at paths that do not overlap. */
  private async plannedVolumes(mounts: readonly VolumeMount[], apiKey: string | undefined): Promise<PlannedVolume[]> {
    if (mounts.length === 0) return [];
    if (!this.volumes) throw invalid('this server keeps no volumes', 'volume_mounts');
    const planned: PlannedVolume[] = [];
    for (const mount of mounts) {
      const path = posix.resolve(mount.path);
      const problem = mountPathProblem(path, planned);
      if (problem) throw invalid(`volume ${mount.volume} at ${mount.path}: ${problem}`, 'volume_mounts');
      const { id } = await this.volumes.find(mount.volume, apiKey);
      planned.push({ id, source: await this.volumes.mountPath(id), path, readOnly: mount.read_only === true });
    }
    return planned;
  }

  /** The running sandboxes that mount the volume `id`. */
  volumeUsers(id: string): string[] {
    return [...this.sandboxes.values()].filter((sandbox) => sandbox.running && sandbox.volumeIds.includes(id)).map((sandbox) => sandbox.id);
  }
}

/** Where a volume may not be mounted: over the system, the sandbox's home itself, or another volume. */
function mountPathProblem(path: string, others: readonly PlannedVolume[]): string | undefined {
  if (path === '/' || path === SANDBOX_HOME || SANDBOX_HOME.startsWith(`${path}/`) || SYSTEM_PATHS.some((system) => path === system || path.startsWith(`${system}/`))) {
    return 'that path belongs to the system, or is the home or holds it';
  }
  const overlapping = others.find((other) => other.path === path || path.startsWith(`${other.path}/`) || other.path.startsWith(`${path}/`));
  return overlapping && `it overlaps volume ${overlapping.id} at ${overlapping.path}`;
}

/** The sandbox's system and the kernel's trees: a volume over them would hide what the sandbox runs on. */
const SYSTEM_PATHS = ['/usr', '/bin', '/sbin', '/lib', '/lib64', '/etc', '/proc', '/sys', '/dev', '/run'];

/**
 * The internet as the sandbox's backend gives it: egress to anywhere but the host, as a run
 * job's "allow" (runner/network-admission.ts); where the backend has no user-mode networking
 * (gVisor, the microVM), its egress proxy for any name, which refuses the host and private
 * ranges as it does for a job's allowed names. No secrets: a sandbox is given none.
 */
function internetOn(backend: SandboxBackend): SandboxNetwork {
  const modes = backend.capabilities.network;
  return modes.includes('proxy') && !modes.includes('egress') ? { proxy: { domains: [ANY_NAME], secrets: [] } } : { allow: null };
}

/**
 * An image's own python, found on its PATH, for what runs by python in a sandbox on it: the code
 * interpreter's kernels, a pause's file archive (its agent is the static one). An image without
 * one runs neither, and says so (interpreter/code-contexts.ts).
 */
const IMAGE_PYTHON: SandboxPlan['python'] = { executable: 'python3', mounts: [] };

/** A create as the sandbox host takes it: the request, and the API key it came with. */
type LaunchRequest = SandboxCreateRequest & {
  api_key?: string;
  /** The image template of `template`, looked up once by create and taken by the capture and the plan; looked up by the plan when not given. */
  imageTemplate?: ImageTemplate | null;
};

const SWEEP_INTERVAL_MS = 3600 * 1000;

/** A create of a sandbox from a kept state: its template, backend and environment, under what the request adds. */
function fromState(state: KeptState, request: LaunchRequest): LaunchRequest {
  const { sandbox } = state;
  return {
    // A paused sandbox, its forks and what is made of its snapshot stay its key's.
    ...(sandbox.api_key !== undefined && { api_key: sandbox.api_key }),
    ...request,
    template: sandbox.template,
    backend: { kind: sandbox.backend },
    env_vars: { ...sandbox.env_vars, ...request.env_vars },
    metadata: request.metadata ?? sandbox.metadata,
    allow_internet_access: request.allow_internet_access ?? sandbox.internet_access,
    ...(request.on_timeout === undefined && sandbox.on_timeout !== undefined && { on_timeout: sandbox.on_timeout }),
    ...(request.on_timeout_keep_memory === undefined && sandbox.on_timeout_keep_memory !== undefined && { on_timeout_keep_memory: sandbox.on_timeout_keep_memory }),
    ...(request.auto_resume === undefined && sandbox.auto_resume !== undefined && { auto_resume: sandbox.auto_resume }),
    ...(sandbox.allow_public_traffic !== undefined && { allow_public_traffic: sandbox.allow_public_traffic }),
    ...(sandbox.mask_request_host !== undefined && { mask_request_host: sandbox.mask_request_host }),
    ...(sandbox.volume_mounts !== undefined && { volume_mounts: sandbox.volume_mounts }),
  };
}

function describePaused(state: KeptState): Sandbox {
  const { sandbox } = state;
  return {
    id: sandbox.id,
    template: sandbox.template,
    backend: sandbox.backend,
    state: 'paused',
    started_at: sandbox.started_at,
    end_at: state.created_at,
    metadata: sandbox.metadata,
    cpu_count: sandbox.cpu_count,
    memory_mb: sandbox.memory_mb,
    disk_size_mb: sandbox.disk_size_mb,
    internet_access: sandbox.internet_access,
    agent_version: null,
    paused_at: state.created_at,
    kept: state.kept,
    ...(sandbox.on_timeout === 'pause' && { on_timeout: 'pause' as const }),
    ...(sandbox.on_timeout_keep_memory !== undefined && { on_timeout_keep_memory: sandbox.on_timeout_keep_memory }),
    ...(sandbox.auto_resume === true && { auto_resume: true }),
    ...(sandbox.api_key !== undefined && { api_key: sandbox.api_key }),
    ...(sandbox.volume_mounts !== undefined && { volume_mounts: sandbox.volume_mounts }),
  };
}

function keptFullError(apiKey: string, purpose: 'pause' | 'snapshot', cap: number): CodedError {
  return purpose === 'pause'
    ? new CodedError(contractError('sandboxes.key_paused_full', `API key ${apiKey} keeps ${cap} paused sandboxes, the most it may; resume or kill one of them first`, { max: cap }))
    : new CodedError(contractError('sandboxes.key_snapshots_full', `API key ${apiKey} keeps ${cap} snapshots, the most it may; delete one of them first`, { max: cap }));
}

function busy(id: string): CodedError {
  return new CodedError(contractError('sandbox.busy', `sandbox ${id} is being paused, resumed, forked or snapshotted; retry when that is done`), { retry_after_seconds: 1 });
}

/** Why keeping or restoring a state failed, as pause_failed; a CodedError (the sandbox ended) is kept as it is. */
function keepFailure(id: string, error: unknown): unknown {
  if (error instanceof CodedError || !(error instanceof Error)) return error;
  // HomeArchiveError, SandboxGoneError, a full disk under the state dir...
  return new CodedError(contractError('sandbox.pause_failed', `sandbox ${id}: ${error.message}`));
}

/** A fork's failure in the contract's shape. */
function errorOf(reason: unknown): { code: string; message: string } {
  if (reason instanceof CodedError) return { code: reason.error.code, message: reason.message };
  return { code: 'sandbox.pause_failed', message: reason instanceof Error ? reason.message : String(reason) };
}

/** 24 characters of [0-9a-z], each uniform (about 124 bits): a sandbox's id is also the name its envd is reached by. */
function randomId(): string {
  const alphabet = '0123456789abcdefghijklmnopqrstuvwxyz';
  return Array.from({ length: 24 }, () => alphabet[randomInt(alphabet.length)]).join('');
}

/** A refusal of the code interpreter (E2B's statuses) as our contract's error. */
function contextRefusal(error: ContextError): CodedError {
  const code = (
    { 400: 'validation.invalid_request', 404: 'sandbox.context_not_found', 429: 'sandbox.contexts_full', 500: 'sandbox.interpreter_failed', 502: 'sandbox.ended' } as const
  )[error.status];
  return new CodedError(contractError(code, error.message));
}

function filePath(path: string): string {
  if (path === '') throw invalid('path: give the file’s path, absolute or relative to the home directory', 'path');
  return path;
}

function invalid(message: string, field: string): CodedError {
  return new CodedError(contractError('validation.invalid_request', message, { field }));
}
