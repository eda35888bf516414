import { join } from 'node:path';
import { keptQuotaOf } from '../config/schema.js';
import { CodedError, contractError } from '../contract/errors.js';
import type { Sandbox, SandboxForkRequest, SandboxForkResult, SandboxPauseRequest, Snapshot, SnapshotCreateRequest } from '../contract/sandbox.js';
import type { CodeContexts } from '../interpreter/code-contexts.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import { visibleTo } from '../util/tenant.js';
import { frozen } from './frozen-processes.js';
import { packHome, unpackHome, type ArchiveRun } from './home-archive.js';
import type { LiveSandbox, SandboxPlan } from './live-sandbox.js';
import { snapshotNotFound } from './sandbox-host.js';
import { randomId, type LaunchRequest } from './sandbox-plan.js';
import type { SandboxTable } from './sandbox-table.js';
import { describeSnapshot, expired, SnapshotStore, type KeptState } from './snapshot-store.js';
import { templateSettings } from './templates.js';

/** A resumed sandbox's id, token and start, which the sandbox it comes back as keeps. */
export interface SandboxIdentity {
  id: string;
  accessToken: string | null;
  startedAt: string;
}

/** What kept sandboxes come back through: the starts and connects of Sandboxes. */
export interface SandboxStarts {
  /** Sandboxes.launch: a sandbox started, from a kept state where `from` is one. */
  launch(request: LaunchRequest, from: KeptState | null, identity?: SandboxIdentity, heldPlace?: object, takesDisk?: boolean): Promise<LiveSandbox>;
  /** Sandboxes.connect: a running sandbox as its creator got it. */
  connect(id: string, timeoutSeconds?: number): Sandbox;
}

const SWEEP_INTERVAL_MS = 3600 * 1000;

/**
 * The states kept of the sandboxes of one process: their pauses, resumes (a request's wake too),
 * forks and snapshots, one such change at a time for each sandbox, within each API key's quota;
 * kept for keptRetentionDays, then swept. Running sandboxes idle for freezeIdleSeconds are frozen
 * here too, never one under such a change.
 */
export class KeptSandboxes {
  /** Pauses and snapshots of API keys being kept now: counted against their keys' quotas. */
  private readonly keeping = new Set<{ apiKey: string; purpose: 'pause' | 'snapshot' }>();
  private readonly store: SnapshotStore;
  /** The states on disk, in the table once this resolves. */
  readonly loaded: Promise<void>;
  /** Sandboxes being paused, resumed, forked or snapshotted (one such change at a time each), and when each change ends. */
  private readonly changing = new Map<string, Promise<void>>();
  private readonly sweeper: NodeJS.Timeout;
  /** Freezes idle sandboxes (sandboxes.freezeIdleSeconds), where set. */
  private readonly freezer: NodeJS.Timeout | undefined;
  private freezing = false;
  /** Sandboxes a pause is keeping (described(): paused once it has ended them). */
  private readonly pausing = new Set<string>();
  /** Resumes under way because requests came for a paused sandbox (wake). */
  private readonly waking = new Map<string, Promise<boolean>>();

  constructor(
    private readonly runtime: RunnerRuntime,
    private readonly table: SandboxTable,
    private readonly codeContexts: CodeContexts,
    private readonly starts: SandboxStarts,
  ) {
    this.store = new SnapshotStore(runtime.config.sandboxes.keptDir ?? join(runtime.config.stateDir, 'sandboxes', 'kept'));
    this.loaded = this.store.load(this.retentionMs()).then((states) => {
      for (const state of states) table.kept.set(state.id, state);
    });
    // Made at start, swept hourly: a paused sandbox or snapshot is kept keptRetentionDays.
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS).unref();
    // Looked at twice an idle period: one idle for it since the look before is frozen.
    const idleMs = runtime.config.sandboxes.freezeIdleSeconds * 1000;
    this.freezer = idleMs > 0 ? setInterval(() => void this.freezeIdle(idleMs), idleMs / 2).unref() : undefined;
  }

  /** No more sweeps nor freezes: the process is stopping. */
  stop(): void {
    clearInterval(this.sweeper);
    clearInterval(this.freezer);
  }

  /** Once every change under way has ended. */
  async changesEnded(): Promise<void> {
    await Promise.all(this.changing.values());
  }

  isChanging(id: string): boolean {
    return this.changing.has(id);
  }

  /**
   * A sandbox as it is; one its pause has ended whose state is still being written (its disk
   * moved aside, its checkpoint's files synced) is paused already, not ended: a client polling
   * for its pause never sees it gone.
   */
  described(sandbox: LiveSandbox): Sandbox {
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
    if (this.table.pausedState(id)) throw new CodedError(contractError('sandbox.paused', `sandbox ${id} is already paused`));
    const sandbox = this.table.running(id);
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
          this.table.kept.set(id, state);
        } finally {
          this.pausing.delete(id);
        }
        this.table.sandboxes.delete(id);
        await sandbox.end('paused');
      }),
    );
    return describePaused(this.table.kept.get(id)!);
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
    const state = this.table.pausedState(id);
    if (!state) return { sandbox: this.starts.connect(id, timeoutSeconds), resumed: false };
    return this.changingWhile(id, async () => {
      const request = fromState(state, { ...(timeoutSeconds === undefined ? {} : { timeout_seconds: timeoutSeconds }), secure: state.sandbox.access_token !== null });
      const sandbox = await this.starts.launch(request, state, { id, accessToken: state.sandbox.access_token, startedAt: state.sandbox.started_at });
      this.table.kept.delete(id);
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
    const state = this.table.pausedState(id);
    if (!state) return this.table.sandboxes.get(id)?.running === true;
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
    const sandbox = this.table.running(id);
    const state = await this.changingWhile(id, () => this.keepRunning(sandbox, { id: randomId(), purpose: 'fork', name: null }));
    try {
      const copy = fromState(state, { ...(request.timeout_seconds === undefined ? {} : { timeout_seconds: request.timeout_seconds }) });
      // One copy takes the fork's state's disk, which goes after; several copy it each.
      const count = request.count ?? 1;
      const made = await Promise.allSettled(Array.from({ length: count }, () => this.starts.launch(copy, state, undefined, undefined, count === 1)));
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
    const sandbox = this.table.running(id);
    const name = request.name ?? null;
    const named = () => this.table.snapshots().filter((older) => name !== null && older.name === name && older.sandbox.api_key === sandbox.apiKey);
    const state = await this.withinKeptQuota(sandbox.apiKey, 'snapshot', named()[0]?.id ?? null, async () => {
      const kept = await this.changingWhile(id, () => this.keepRunning(sandbox, { id: randomId(), purpose: 'snapshot', name }));
      this.table.kept.set(kept.id, kept);
      return kept;
    });
    for (const older of named()) if (older.id !== state.id) await this.dropState(older.id);
    return describeSnapshot(state);
  }

  async listSnapshots(filter: { sandbox_id?: string; name?: string } = {}): Promise<Snapshot[]> {
    await this.loaded;
    return this.table
      .snapshots()
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

  /**
   * The snapshot a template names for the key `apiKey` (undefined: the service token): by id, one
   * the key sees (the token: any); by name, the key's own, names being each key's. None for a
   * template of the configuration.
   */
  snapshotFor(template: string | undefined, apiKey: string | undefined): KeptState | undefined {
    if (template === undefined || templateSettings(this.runtime.config.sandboxes, template) !== null) return undefined;
    const state = this.table.kept.get(template);
    if (state?.purpose === 'snapshot' && visibleTo(apiKey, state.sandbox.api_key)) return state;
    return this.table.snapshots().find((snapshot) => snapshot.name === template && snapshot.sandbox.api_key === apiKey);
  }

  /** A running sandbox kept whole, its memory with its files, as a fork's state is (a template's capture); its checkpoint ends it. */
  keepWhole(sandbox: LiveSandbox): Promise<KeptState> {
    return this.changingWhile(sandbox.id, () => this.keep(sandbox, { id: randomId(), purpose: 'fork', name: null }, 'memory'));
  }

  /** Removes a state the table does not hold (a template's capture) from the disk. */
  discard(id: string): Promise<void> {
    return this.store.remove(id);
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
    const held = [...this.table.kept.values()].filter((state) => state.sandbox.api_key === apiKey && state.id !== replaces);
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
    this.table.starting.set(place, sandbox.apiKey);
    try {
      const state = await this.keep(sandbox, as, 'memory');
      const left = Math.max(1, Math.ceil((endsAt - Date.now()) / 1000));
      const identity = { id: sandbox.id, accessToken: sandbox.accessToken, startedAt: state.sandbox.started_at };
      try {
        await this.starts.launch(fromState(state, { timeout_seconds: left, secure: sandbox.accessToken !== null }), state, identity, place);
      } catch (error) {
        // Not lost: what was kept of it becomes its paused state, to resume.
        this.table.kept.set(sandbox.id, await this.store.repurpose(state, { id: sandbox.id, purpose: 'pause', name: null }));
        const why = error instanceof Error ? error.message : String(error);
        throw new CodedError(contractError('sandbox.pause_failed', `sandbox ${sandbox.id} was kept but could not come back (${why}); it is paused: resume it`));
      }
      return state;
    } finally {
      this.table.starting.delete(place);
    }
  }

  async dropState(id: string): Promise<void> {
    // A paused sandbox's contexts waited for it: it will not come back.
    this.codeContexts.resumed(id, null);
    this.table.kept.delete(id);
    await this.store.remove(id);
  }

  /** Freezes each running sandbox idle for `idleMs` (LiveSandbox.freezeIfIdle); not one being paused, forked or snapshotted. */
  private async freezeIdle(idleMs: number): Promise<void> {
    // One look at a time: a freeze may wait a while for its processes to stop.
    if (this.freezing) return;
    this.freezing = true;
    try {
      for (const sandbox of [...this.table.sandboxes.values()]) {
        if (!this.changing.has(sandbox.id)) await sandbox.freezeIfIdle(idleMs).catch(() => undefined);
      }
    } finally {
      this.freezing = false;
    }
  }

  private async sweep(): Promise<void> {
    for (const state of [...this.table.kept.values()]) if (!this.changing.has(state.id) && expired(state, this.retentionMs())) await this.dropState(state.id);
  }

  private retentionMs(): number {
    return this.runtime.config.sandboxes.keptRetentionDays * 24 * 3600 * 1000;
  }

  /** What a sandbox started from a kept state takes of it: the memory kept, or the disk it was kept on (`takesDisk`: that disk itself, not a copy). */
  planFrom(from: KeptState, takesDisk: boolean): Partial<Pick<SandboxPlan, 'resume' | 'fromDisk' | 'startTimeoutSeconds'>> {
    const settings = this.runtime.config.sandboxes;
    return {
      // Its home and memory come back within the pause deadline, not a start's.
      ...(from.kept === 'memory' && { resume: this.resumeOf(from), startTimeoutSeconds: Math.max(settings.startTimeoutSeconds, settings.pauseTimeoutSeconds) }),
      ...(from.files === 'disk' && { fromDisk: { image: this.store.paths(from.id).disk, take: takesDisk } }),
    };
  }

  private resumeOf(from: KeptState): NonNullable<SandboxPlan['resume']> {
    const { home, memory } = this.store.paths(from.id);
    return { image: memory, archive: home, agentVersion: from.sandbox.agent_version ?? null };
  }

  async restoreHome(sandbox: LiveSandbox, from: KeptState): Promise<void> {
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
}

/** A create of a sandbox from a kept state: its template, backend and environment, under what the request adds. */
export function fromState(state: KeptState, request: LaunchRequest): LaunchRequest {
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

export function describePaused(state: KeptState): Sandbox {
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

export function busy(id: string): CodedError {
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
