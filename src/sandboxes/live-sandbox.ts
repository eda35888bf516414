import { closeSync } from 'node:fs';
import { access } from 'node:fs/promises';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { argvProblem, environmentProblem } from '../contract/command-limits.js';
import { CodedError, contractError } from '../contract/errors.js';
import type { PauseKind } from '../contract/backend.js';
import type { Sandbox, SandboxMetrics } from '../contract/sandbox.js';
import type { AgentUser } from '../contract/sandbox-agent.js';
import { execRulesFor, type ExecPolicy } from '../policy/exec-rules.js';
import { CheckpointTimeoutError, SandboxUnavailableError, type ExecRules, type Mount, type PreparedSandbox, type SandboxBackend, type SandboxNetwork } from '../isolation/types.js';
import { SANDBOX_SEARCH_PATH } from '../isolation/profiles.js';
import { PortRelay } from '../isolation/host/port-relay.js';
import { AgentChannel, type AgentHold } from './agent-channel.js';
import { sandboxAgentProgram, sandboxAgentArgv } from './agent-program.js';
import { refusedHere, ServedSandbox } from './served-sandbox.js';
import { AgentOperationError, type SandboxAgentPort } from './agent-port.js';
import type { KeptSandbox } from './snapshot-store.js';
import { homeArchiveArgv } from './home-archive.js';
import { thaw } from './frozen-processes.js';
import { withinDeadline } from '../util/deadline.js';
import { sandboxFreezes } from '../util/metrics.js';

/** The sandbox user's home: its work dir, the cwd of its processes, where its files go. */
export const SANDBOX_HOME = '/home/user';
export const SANDBOX_USER: AgentUser = 'user';

/** Where a sandbox sees its agent (the static program, bound in read-only): beside nothing of its root's, an image's or the host's. */
const AGENT_PATH = '/.agent-runner/sandbox-agent';

/** Everything a sandbox is made of, checked and resolved by Sandboxes.create. */
export interface SandboxPlan {
  id: string;
  template: string;
  backend: SandboxBackend;
  /** What runs by python in it (its home's archiver, code-interpreter kernels): the python the host resolved, and the read-only trees it needs. */
  python: { executable: string; mounts: readonly Mount[] };
  /**
   * Its root is an image's (a template made of one): its layers, the size of its own writable
   * layer, and what the image starts processes with.
   */
  image?: { layers: readonly string[]; writableBytes: number; env: Readonly<Record<string, string>> };
  /** Given to every process it starts, under what each start asks for. */
  envVars: Readonly<Record<string, string>>;
  metadata: Readonly<Record<string, string>>;
  network: SandboxNetwork;
  timeoutMs: number;
  accessToken: string | null;
  /** Whether any client reaches its ports; otherwise each request carries its access token (E2B's allowPublicTraffic). */
  publicTraffic: boolean;
  /** The Host header its ports' servers see (E2B's maskRequestHost); null: the client's. */
  maskRequestHost: string | null;
  memoryBytes: number;
  maxProcesses: number;
  maxOpenFiles: number;
  cpuCores: number;
  /** Its work dir, the home of its user and the cwd of its processes: SANDBOX_HOME but for a session's. */
  home: string;
  homeBytes: number;
  /** The largest file a process of it may write. */
  maxFileBytes: number;
  /** Output of one process its agent sends before the host passed it on (sandboxes.streams.outputWindowBytes; default the agent's). */
  outputWindowBytes?: number;
  startTimeoutSeconds: number;
  /** Its agent is pinged after this much silence, and ended (`error`) when it owes an answer four times as long (sandboxes.heartbeatSeconds). */
  heartbeatMs: number;
  /** What its timeout does: end it, or pause it (Sandboxes pauses it; a pause that fails ends it). */
  onTimeout?: 'kill' | 'pause';
  /** What the pause at its timeout keeps: true its memory too, false its files only; undefined: as much as its backend keeps. */
  onTimeoutKeepMemory?: boolean;
  /** Once paused, a request for it resumes it. */
  autoResume?: boolean;
  /** When it first started: a resumed sandbox's is its first start's. Default: now. */
  startedAt?: Date;
  /** The name of the API key that made it (service.apiKeys); undefined: the service token. */
  apiKey?: string;
  /** Its longest life, however its timeout is moved. */
  maxLifetimeMs: number;
  /**
   * An exec policy enforced inside it (a session's): its agent and all it starts may execute
   * what the policy allows and `programs` (sandbox paths: the python the agent and its kernels
   * run on, a kernel's node) with the read-only `trees` they come from. Without: anything.
   */
  execGuard?: { policy: ExecPolicy; programs: readonly string[]; trees: readonly string[] };
  /**
   * Comes back from a pause that kept memory (its backend's checkpoint, `image`), its home
   * from `archive` first, its agent the one that was saved (of `agentVersion`).
   */
  resume?: { image: string; archive: string; agentVersion: string | null };
  /** Runs on the disk a sandbox was kept on (its home and root's changes as they were): SandboxTemplate.fromDisk. */
  fromDisk?: { image: string; take: boolean };
  /** Volumes mounted in it once it runs: `source` where the volume's file system is mounted on the host. */
  volumes?: readonly PlannedVolume[];
}

export interface PlannedVolume {
  id: string;
  source: string;
  path: string;
  readOnly: boolean;
}

/**
 * One long-lived sandbox: a prepared sandbox whose one long job is the agent, serving
 * processes, files and watches until the sandbox is killed or its timeout passes (which
 * `setTimeout` moves). When it ends, every process in it ends with it: the backend kills the
 * sandbox's whole tree, whatever the agent does.
 */
export class LiveSandbox {
  private readonly channel: AgentChannel;
  private readonly served: ServedSandbox;
  private readonly startedAt: Date;
  /** When this run of it began (a resumed sandbox's run too), for how long it ran. */
  private readonly launchedAt = performance.now();
  private endAt: Date;
  private timer: NodeJS.Timeout | undefined;
  private agentVersion: string | null = null;
  private prepared: PreparedSandbox | null = null;
  /** The last CPU reading, for the share used since then. */
  private lastCpu: { at: number; cpuMs: number } = { at: performance.now(), cpuMs: 0 };
  /** What its processes had used when freezeIfIdle last looked: one that used any since is not idle. */
  private cpuAtLastLook: { at: number; cpuMs: number } | null = null;
  /** Frozen by freezeIfIdle, until its next request thaws it. */
  private frozen = false;
  /** The host's relay to the ports of its loopback (connectPort), started by the first connection, stopped by a checkpoint or its end. */
  private relay: Promise<PortRelay> | null = null;
  /** The connections open through the relay: while one is, it is not idle. */
  private readonly relayed = new Set<Socket>();

  private constructor(
    private readonly plan: SandboxPlan,
    onEnded: (sandbox: LiveSandbox) => void,
    /** Called at its timeout instead of ending it, when its plan pauses it then. */
    private readonly onTimeout?: (sandbox: LiveSandbox) => void,
  ) {
    this.channel = new AgentChannel(plan.resume ? (plan.resume.agentVersion ?? 'unknown') : undefined, plan.outputWindowBytes);
    this.startedAt = plan.startedAt ?? new Date();
    this.endAt = new Date(Date.now() + plan.timeoutMs);
    this.served = new ServedSandbox(this.channel, SERVED_BY, (reason) => {
      this.endAt = new Date();
      clearTimeout(this.timer);
      this.channel.lose(`sandbox ${plan.id} has ended: ${reason}`);
      this.stopRelay();
      onEnded(this);
    });
  }

  /** Makes the sandbox and waits for its agent; throws CodedError (backend.unavailable, backend.setup_failed). */
  static async start(plan: SandboxPlan, onEnded: (sandbox: LiveSandbox) => void, onTimeout?: (sandbox: LiveSandbox) => void): Promise<LiveSandbox> {
    const sandbox = new LiveSandbox(plan, onEnded, onTimeout);
    await sandbox.launch();
    return sandbox;
  }

  get id(): string {
    return this.plan.id;
  }

  get running(): boolean {
    return this.served.running;
  }

  /** Its state: an end by failure (its agent or runtime died or went silent) is `error`. */
  private get state(): 'running' | 'ended' | 'error' {
    if (this.served.running) return 'running';
    return this.served.failed ? 'error' : 'ended';
  }

  /** Why it ended; null while it runs. */
  get endedReason(): string | null {
    return this.served.reason;
  }

  /** The token every request to its ports must carry; null: its ports are public. */
  get trafficToken(): string | null {
    return this.plan.publicTraffic ? null : this.plan.accessToken;
  }

  get maskRequestHost(): string | null {
    return this.plan.maskRequestHost;
  }

  get accessToken(): string | null {
    return this.plan.accessToken;
  }

  /** The python inside the sandbox (its home's archiver's, and its code interpreter's kernels'). */
  get python(): string {
    return this.plan.python.executable;
  }

  get metadata(): Readonly<Record<string, string>> {
    return this.plan.metadata;
  }

  /** Seconds since this run of it began. */
  get runSeconds(): number {
    return (performance.now() - this.launchedAt) / 1000;
  }

  get home(): string {
    return this.plan.home;
  }

  /** Whether it has a root of its own (launch: its backend can give one, and no guard takes it away). */
  get rootInside(): boolean {
    return this.plan.backend.capabilities.root_inside && this.plan.execGuard === undefined;
  }

  /**
   * What a pause keeps of it (and what its forks and snapshots copy): as much as its backend can
   * for this sandbox (gVisor cannot save one on the host's network stack, its egress proxy's).
   */
  get pauseKind(): PauseKind {
    // A volume is mounted into it after its start, which a checkpoint cannot give back: its files
    // are kept, and the next sandbox of it mounts its volumes again.
    if (this.plan.volumes?.length) return 'files';
    return this.plan.backend.capabilities.pause === 'memory' && this.prepared?.checkpoint ? 'memory' : 'files';
  }

  /**
   * Whether what a checkpoint saves holds its files too: its home lives inside the sandbox (a
   * microVM's guest memory), not in a host directory the checkpoint only refers to.
   */
  get checkpointHoldsFiles(): boolean {
    return !this.plan.backend.capabilities.host_work_dir;
  }

  /** The name of the API key that made it; undefined: the service token. */
  get apiKey(): string | undefined {
    return this.plan.apiKey;
  }

  /**
   * Holds its agent for a checkpoint: from now on only the holder's requests reach it (the
   * processes frozen, the home packed, through `port`), everyone else's are answered busy, so
   * nothing reaches the sandbox that the state about to be kept would miss. Release the hold if
   * the checkpoint is not taken.
   */
  hold(): AgentHold {
    const held = this.channel.hold(`sandbox ${this.plan.id} is being paused`);
    return { ...held, port: this.withEnvironment(held.port) };
  }

  /**
   * Saves every process of it with its memory into `image` (its backend's checkpoint), then it
   * ends, `paused`. `hold` (from hold()) is drained first: no reply is owed when it is saved
   * (within `deadlineMs`). On failure it runs on, unless the backend gave up on it past its
   * deadline (CheckpointTimeoutError): then it is ended, saying so. `diskAt`: where its disk is
   * kept (keepsDisk) once the checkpoint has ended it; its files are there, not in the image.
   */
  async checkpoint(image: string, hold: AgentHold, deadlineMs: number, diskAt?: string): Promise<void> {
    const prepared = this.prepared;
    if (!prepared?.checkpoint) throw new Error(`its backend (${this.plan.backend.kind}) cannot keep a sandbox's memory`);
    try {
      await drained(hold, deadlineMs);
      // Nothing of the host's may be connected to it when it is saved; the hold refuses new connections.
      this.stopRelay();
      // Its files stay on its disk, kept where it is once the checkpoint has ended it.
      if (diskAt !== undefined) prepared.keepDisk!(diskAt);
      await this.served.suspend('paused', () => prepared.checkpoint!(image, deadlineMs));
    } catch (error) {
      if (diskAt !== undefined) prepared.keepDisk!(null);
      if (error instanceof CheckpointTimeoutError) await this.end(`pausing it did not finish within its deadline: ${error.message}`);
      throw error;
    }
    clearTimeout(this.timer);
    if (diskAt !== undefined && this.served.releaseFailure) throw this.served.releaseFailure;
  }

  /**
   * Freezes it (PreparedSandbox.freeze) when nothing was asked of its agent, nor said by it, for
   * `idleMs`, no client follows a process of it (a command's output or end, a watch), and its
   * processes used no CPU since the last call, at least half a period before: its agent's channel
   * thaws it before the next request (AgentChannel.frozenUntil). Whether it is frozen now.
   */
  async freezeIfIdle(idleMs: number): Promise<boolean> {
    const prepared = this.prepared;
    if (this.frozen || !this.running || !prepared?.freeze || !prepared.thaw || !prepared.usageNow) return this.frozen;
    const { cpuMs } = await prepared.usageNow();
    const now = performance.now();
    const before = this.cpuAtLastLook;
    // Two looks close together would see no CPU used by a process that works all the time.
    if (before !== null && now - before.at < idleMs / 2) return false;
    this.cpuAtLastLook = cpuMs === null ? null : { at: now, cpuMs };
    const quiet = () => this.channel.quietForMs >= idleMs && !this.channel.owes && !this.channel.followed && this.relayed.size === 0;
    if (!quiet() || cpuMs === null || before === null || cpuMs - before.cpuMs > IDLE_CPU_MS) return false;
    if (!(await prepared.freeze())) return false;
    // Asked meanwhile (or ended): it goes on at once.
    if (!quiet() || !this.running) {
      await prepared.thaw();
      return false;
    }
    this.frozen = true;
    const backend = this.plan.backend.kind;
    sandboxFreezes.inc({ backend, event: 'frozen' });
    this.channel.frozenUntil(async () => {
      await prepared.thaw!();
      this.frozen = false;
      sandboxFreezes.inc({ backend, event: 'thawed' });
    });
    return true;
  }

  /** Whether its files are kept where they are, its disk (keepDisk, copyDisk), not packed through its agent. */
  get keepsDisk(): boolean {
    return this.prepared?.keepDisk !== undefined && this.prepared.copyDisk !== undefined;
  }

  /**
   * Ends it, `reason`, its disk (its home, its root's changes) kept at `image` where it is: the
   * files of a pause, which a sandbox started with plan.fromDisk runs on again.
   */
  async endKeepingDisk(image: string, reason: string): Promise<void> {
    if (!this.prepared?.keepDisk) throw new Error(`its backend (${this.plan.backend.kind}) keeps no disk of a sandbox`);
    this.prepared.keepDisk(image);
    await this.served.end(reason);
    if (this.served.releaseFailure) throw this.served.releaseFailure;
    // Ended on its own before it was asked, its disk went with it.
    await access(image).catch(() => Promise.reject(new Error(`it ended before its disk was kept: ${this.served.reason}`)));
  }

  /** A copy of its disk at `image`, as it is this instant (its processes frozen by the caller): a fork's, a snapshot's. */
  async copyDisk(image: string): Promise<void> {
    if (!this.prepared?.copyDisk) throw new Error(`its backend (${this.plan.backend.kind}) keeps no disk of a sandbox`);
    await this.prepared.copyDisk(image);
  }

  /** Whether its backend can save it with its memory and leave it running (checkpointRunning). */
  get checkpointsRunning(): boolean {
    return this.pauseKind === 'memory' && this.prepared?.checkpointRunning !== undefined;
  }

  /**
   * Saves every process of it with its memory into `image`, as checkpoint does, and it goes on
   * running: `hold` is drained first and released after, whatever the outcome.
   */
  async checkpointRunning(image: string, hold: AgentHold, deadlineMs: number): Promise<void> {
    const prepared = this.prepared;
    if (!prepared?.checkpointRunning) throw new Error(`its backend (${this.plan.backend.kind}) cannot save a sandbox and leave it running`);
    try {
      await drained(hold, deadlineMs);
      this.stopRelay();
      await prepared.checkpointRunning(image, deadlineMs);
    } finally {
      hold.release();
    }
  }

  /** What it was made with, as kept with its paused state or a snapshot of it. */
  keptAs(): KeptSandbox {
    const { plan } = this;
    const described = this.describe();
    return {
      id: plan.id,
      template: plan.template,
      backend: plan.backend.kind,
      env_vars: { ...plan.envVars },
      metadata: { ...plan.metadata },
      internet_access: described.internet_access,
      access_token: plan.accessToken,
      started_at: described.started_at,
      cpu_count: described.cpu_count,
      memory_mb: described.memory_mb,
      disk_size_mb: described.disk_size_mb,
      ...(plan.onTimeout && { on_timeout: plan.onTimeout }),
      ...lifecycleOf(plan),
      ...(!plan.publicTraffic && { allow_public_traffic: false }),
      ...(plan.maskRequestHost !== null && { mask_request_host: plan.maskRequestHost }),
      ...(plan.apiKey !== undefined && { api_key: plan.apiKey }),
      ...(this.agentVersion !== null && { agent_version: this.agentVersion }),
      ...(described.volume_mounts && { volume_mounts: described.volume_mounts }),
    };
  }

  /**
   * Its agent, with the sandbox's environment under each process's own. A process whose own
   * command line or environment is over what exec takes (contract/command-limits.ts) is refused
   * here, as invalid, for every face: with the sandbox's environment (bounded at create) it could
   * not start, or would take the room the others count on.
   */
  /**
   * A TCP connection to `port` on its loopback made by the host, once made (rejects with
   * PortClosedError when nothing listens): through a relay in its network namespace
   * (isolation/host/port-relay.ts), no frame of its agent's protocol on the way. Null where its
   * backend lets the host into no network of its (then its agent connects: PortTunnel).
   */
  connectPort(port: number): Promise<Duplex> | null {
    const open = this.prepared?.openNetworkNamespace;
    if (!open) return null;
    return this.channel.awake().then(async () => {
      let relay = await this.portRelay(open);
      if (!relay.alive) {
        this.stopRelay();
        relay = await this.portRelay(open);
      }
      const socket = await relay.connect(port);
      this.relayed.add(socket);
      socket.once('close', () => this.relayed.delete(socket));
      return socket;
    });
  }

  private portRelay(openNetworkNamespace: () => number): Promise<PortRelay> {
    if (this.relay === null) {
      const fd = openNetworkNamespace();
      const starting = PortRelay.start(sandboxAgentProgram(), fd).finally(() => closeSync(fd));
      this.relay = starting;
      starting.then(
        // Stopped (or ended) while it started: it is not wanted.
        (relay) => this.relay !== starting && relay.stop(),
        () => this.relay === starting && (this.relay = null),
      );
    }
    return this.relay;
  }

  private stopRelay(): void {
    const relay = this.relay;
    this.relay = null;
    void relay?.then(
      (started) => started.stop(),
      () => undefined,
    );
  }

  get agent(): SandboxAgentPort {
    return this.withEnvironment(this.channel);
  }

  private withEnvironment(port: SandboxAgentPort): SandboxAgentPort {
    const { envVars } = this.plan;
    return {
      request: (request) => port.request(request),
      start: (request, listener) => {
        if (request.op === 'connect') return port.start(request, listener);
        const problem = argvProblem([request.cmd, ...request.args], 'the command line') ?? environmentProblem(request.envs, 'envs');
        if (problem !== undefined) return Promise.reject(new AgentOperationError({ code: 'invalid', message: problem }));
        return port.start({ ...request, envs: { ...envVars, ...request.envs } }, listener);
      },
      follow: (pid, listener) => port.follow(pid, listener),
      onWatch: (watch, listener) => port.onWatch(watch, listener),
    };
  }

  /** `withToken`: the envd access token is shown to whoever created the sandbox, not in lists. */
  describe(withToken = false): Sandbox {
    const { plan } = this;
    return {
      id: plan.id,
      template: plan.template,
      backend: plan.backend.kind,
      state: this.state,
      started_at: this.startedAt.toISOString(),
      end_at: this.endAt.toISOString(),
      metadata: { ...plan.metadata },
      cpu_count: plan.cpuCores,
      memory_mb: Math.floor(plan.memoryBytes / 2 ** 20),
      disk_size_mb: Math.floor(plan.homeBytes / 2 ** 20),
      internet_access: plan.network !== 'none',
      agent_version: this.agentVersion,
      ...(withToken && plan.accessToken !== null ? { envd_access_token: plan.accessToken } : {}),
      ...(this.served.reason === null ? {} : { ended_reason: this.served.reason }),
      ...(plan.onTimeout === 'pause' && { on_timeout: 'pause' as const }),
      ...lifecycleOf(plan),
      ...(plan.apiKey !== undefined && { api_key: plan.apiKey }),
      ...(plan.volumes?.length && { volume_mounts: plan.volumes.map(({ id, path, readOnly }) => ({ volume: id, path, ...(readOnly && { read_only: true }) })) }),
    };
  }

  /** The ids of the volumes it mounts. */
  get volumeIds(): string[] {
    return (this.plan.volumes ?? []).map((volume) => volume.id);
  }

  /** Its processes' use now; the CPU share is of its cores since the previous reading. */
  async metrics(): Promise<SandboxMetrics> {
    if (!this.running) throw this.endedError();
    const usage = (await this.prepared?.usageNow?.()) ?? null;
    const now = performance.now();
    let cpuUsedPct: number | null = null;
    if (usage?.cpuMs != null) {
      const elapsed = now - this.lastCpu.at;
      if (elapsed > 0) cpuUsedPct = Math.min(100, Math.round((10_000 * (usage.cpuMs - this.lastCpu.cpuMs)) / (elapsed * this.plan.cpuCores)) / 100);
      this.lastCpu = { at: now, cpuMs: usage.cpuMs };
    }
    return {
      timestamp: new Date().toISOString(),
      cpu_count: this.plan.cpuCores,
      cpu_used_pct: cpuUsedPct,
      mem_used_bytes: usage?.memoryBytes ?? null,
      mem_total_bytes: this.plan.memoryBytes,
      disk_used_bytes: usage?.workDirUsedBytes ?? null,
      disk_total_bytes: usage?.workDirTotalBytes ?? null,
    };
  }

  /** Kills the sandbox `timeoutMs` from now (0: now). */
  setTimeout(timeoutMs: number): void {
    if (!this.running) throw this.endedError();
    this.endAt = new Date(Date.now() + timeoutMs);
    this.arm();
  }

  /** Ends the sandbox (idempotent): its agent's stdin closes and its whole tree is killed. */
  end(reason: string): Promise<void> {
    return this.served.end(reason);
  }

  endedError(): CodedError {
    return new CodedError(contractError('sandbox.ended', `sandbox ${this.plan.id} has ended: ${this.served.reason}`, { ended_reason: this.served.reason }));
  }

  private async launch(): Promise<void> {
    const { plan } = this;
    const guard = plan.execGuard;
    // Volumes are mounted into the running sandbox where its backend can (a pre-started one takes
    // them), else bound in as it starts (its volumes' files keep the ids they have inside), or
    // shared with the VM it runs in.
    const volumesBy = plan.backend.capabilities.volumes;
    if (plan.volumes?.length && volumesBy === 'none') {
      throw refusedHere(new SandboxUnavailableError(`a sandbox on ${plan.backend.kind} cannot mount volumes here (docs/volumes.md)`));
    }
    const volumeMounts: Mount[] = (plan.volumes ?? []).map((volume) => ({ host: volume.source, sandbox: volume.path, writable: !volume.readOnly }));
    const boundVolumes = volumesBy === 'bind' ? volumeMounts : [];
    // The agent is root of the sandbox's own namespace, to start E2B's `root` processes; a
    // guarded sandbox (a session's policy) has no root: everything in it runs as the user.
    const rootInside = guard === undefined;
    const template = {
      profile: 'run-job',
      // The static agent on every root: no interpreter starts with each sandbox (a python agent
      // took some 30 ms of CPU and 9 MiB a sandbox), and an image needs nothing of its own for it.
      argv: sandboxAgentArgv({ path: AGENT_PATH, rootInside }),
      cwd: plan.home,
      // The same for every sandbox of a kind, so a pre-started one serves the next create: what
      // differs per sandbox (its env vars) reaches its processes through the agent.
      env: { PATH: SANDBOX_SEARCH_PATH.join(':'), ...plan.image?.env, HOME: plan.home, USER: SANDBOX_USER, LANG: 'C.UTF-8' },
      mounts: [{ host: sandboxAgentProgram(), sandbox: AGENT_PATH, writable: false }, ...(plan.image ? [] : plan.python.mounts), ...boundVolumes],
      ...(volumesBy === 'share' && volumeMounts.length > 0 && { volumes: volumeMounts }),
      ...(plan.image && { image: { layers: plan.image.layers, writableBytes: plan.image.writableBytes } }),
      files: [],
      // On an image the home is the image's own (what its build left there), in the sandbox's
      // writable layer; otherwise a file system of its own.
      ...(!plan.image && { workDir: plan.home, workDirBytes: plan.homeBytes }),
      // Its root is its own to change, as on E2B (files at /, root's home, the system's), the
      // writes on its home's file system.
      writableRoot: rootInside,
      // E2B's passwordless sudo, served by the agent (agent/sudo.go).
      ...(rootInside && { sudo: sandboxAgentProgram() }),
      network: plan.network,
      // A guarded sandbox gets its rules before start, so it is not pre-started.
      startsEarly: guard === undefined && !plan.resume && !plan.fromDisk,
      // The agent reaps what its processes leave: it is the sandbox's init.
      runsAsInit: true,
      terminals: true,
      user: 'user',
      rootInside,
      ...(guard && { guardExec: true, withoutShells: !guard.policy.allow_shell }),
      ...(plan.fromDisk && { fromDisk: plan.fromDisk }),
      ...(plan.resume && {
        restore: {
          image: plan.resume.image,
          ...(!plan.fromDisk && { home: { argv: homeArchiveArgv(plan.python.executable, 'unpack', plan.home), archive: plan.resume.archive } }),
        },
      }),
      limits: {
        memoryBytes: plan.memoryBytes,
        memoryMechanism: 'cgroup',
        maxProcesses: plan.maxProcesses,
        maxOpenFiles: plan.maxOpenFiles,
        maxFileBytes: plan.maxFileBytes,
        cpuCores: plan.cpuCores,
      },
    } as const;
    let prepared;
    try {
      prepared = await plan.backend.prepare(template);
      if (volumesBy === 'attach' && plan.volumes?.length && !prepared.attachVolume)
        throw new SandboxUnavailableError(`a sandbox on ${plan.backend.kind} cannot mount volumes here`);
      if (guard) await prepared.restrictExec(await this.execRules(prepared, guard));
    } catch (error) {
      prepared?.discard();
      throw refusedHere(error);
    }
    this.prepared = prepared;
    this.lastCpu = { at: performance.now(), cpuMs: 0 };
    // Its own timer ends it (setTimeout moves it); the backend's deadline is the ceiling.
    this.served.serve(prepared, plan.maxLifetimeMs);
    this.agentVersion = await this.served.untilReady(this.channel.started(), plan.startTimeoutSeconds, 'the sandbox');
    this.channel.watch(plan.heartbeatMs, (reason) => void this.served.fail(reason));
    // Before anyone is handed it: its first process finds them there.
    for (const volume of volumesBy === 'attach' ? (plan.volumes ?? []) : []) {
      await this.served.untilReady(prepared.attachVolume!(volume.source, volume.path, volume.readOnly), plan.startTimeoutSeconds, `volume ${volume.id}`);
    }
    // A restored agent said it was ready before its checkpoint: its answer now says it runs, and
    // what the pause stopped for its files to be packed goes on.
    if (plan.resume) {
      const comeBack = async () => {
        // At most as many as it may run: a list is the sandbox's word.
        const { processes } = await this.channel.request({ op: 'list' });
        const kept = processes.slice(0, plan.maxProcesses);
        this.channel.adopt(kept.map(({ pid }) => pid));
        await thaw(this.channel, kept);
      };
      await this.served.untilReady(comeBack(), plan.startTimeoutSeconds, 'the restored sandbox');
    }
    this.arm();
  }

  /**
   * Its exec rules, from the translation run jobs use: the agent is the program (Landlock lets
   * the guard execute it only as an allowed file: the agent does nothing for the code that
   * runs it again but speak its protocol on that code's own pipes), the interpreters the plan
   * names and their toolchain trees are its own.
   */
  private async execRules(sandbox: PreparedSandbox, guard: NonNullable<SandboxPlan['execGuard']>): Promise<ExecRules> {
    const lookup = { searchPath: SANDBOX_SEARCH_PATH, cwd: this.plan.home };
    const commands = await Promise.all(guard.programs.map((path) => sandbox.resolveCommand(path, lookup)));
    return execRulesFor(
      guard.policy,
      { program: AGENT_PATH, commands: commands.filter((command) => command !== null), trees: [...guard.trees, AGENT_PATH] },
      sandbox,
      this.plan.home,
    );
  }

  private arm(): void {
    clearTimeout(this.timer);
    const left = Math.max(0, this.endAt.getTime() - Date.now());
    this.timer = setTimeout(() => (this.plan.onTimeout === 'pause' && this.onTimeout ? this.onTimeout(this) : void this.end('its timeout passed')), left);
    this.timer.unref();
  }
}

/** Until no reply is owed through `hold` (a checkpoint may then be taken), within `deadlineMs`. */
function drained(hold: AgentHold, deadlineMs: number): Promise<void> {
  return withinDeadline(hold.drained(), deadlineMs, () => new Error(`its agent still owed answers after ${Math.round(deadlineMs / 1000)} s`));
}

/** CPU time an idle sandbox may use between two looks and still be idle: its agent answering a heartbeat's ping. */
const IDLE_CPU_MS = 5;

const SERVED_BY = { program: 'its agent', timedOut: 'its longest lifetime passed', aborted: 'killed', outOfMemory: 'it ran out of memory and was killed' };

/** What its plan says of its pause at the timeout and of resuming by itself, as a sandbox and its kept state carry it. */
function lifecycleOf(plan: Pick<SandboxPlan, 'onTimeoutKeepMemory' | 'autoResume'>): { on_timeout_keep_memory?: boolean; auto_resume?: boolean } {
  return {
    ...(plan.onTimeoutKeepMemory !== undefined && { on_timeout_keep_memory: plan.onTimeoutKeepMemory }),
    ...(plan.autoResume === true && { auto_resume: true }),
  };
}
