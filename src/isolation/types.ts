import type { Readable } from 'node:stream';
import type { CgroupUsage } from './host/cgroups.js';
import type { ProxiedEgress } from '../egress/policy.js';
import type { BackendCapabilities } from '../contract/backend.js';
import type { BackendKind } from '../contract/backend-kinds.js';
import type { CollectedArtifacts } from '../workspace/artifacts.js';
import type { SnapshotReport } from '../workspace/snapshot.js';
import type { IdRange } from '../util/id-ranges.js';

/**
 * The named shapes of sandbox the faces ask for. snippet, task and run-job see a minimal
 * system (/usr, a few /etc files) and a private /tmp; run-job adds a work directory that holds
 * the workspace snapshot. workspace (agent-exec) sees the host read-only with its secrets
 * hidden and writes only its cwd.
 */
export type SandboxProfile = 'snippet' | 'task' | 'run-job' | 'workspace';

/**
 * What a sandbox is made of, fixed before it starts. Paths in argv/cwd are sandbox paths.
 * Two templates that serialise alike can share warm, pre-started sandboxes.
 */
export interface SandboxTemplate {
  profile: Exclude<SandboxProfile, 'workspace'>;
  argv: readonly string[];
  cwd: string;
  env: Readonly<Record<string, string>>;
  /** Host paths made visible inside the sandbox (toolchains, a compiler's output dir). */
  mounts: readonly Mount[];
  /**
   * Volumes' file systems (host mounts, volumes/volume-store.ts) the sandbox finds at their paths
   * as it starts, for a backend whose capabilities.volumes is `share` (a microVM: through the VM's
   * shared directory); the others take volumes as mounts (bind) or attach them (attach).
   */
  volumes?: readonly Mount[];
  /** Per-job files, created empty and mounted read-only; their content is written just before start. */
  files: readonly StagedFile[];
  /**
   * Sandbox path of a writable work directory the backend creates empty for each sandbox,
   * owned by the job's uid; the caller fills it before start and reads it after.
   */
  workDir?: string;
  /** Size of the work directory: as root it is a tmpfs of this size, so filling it fails in the job only. */
  workDirBytes?: number;
  limits: ResourceLimits;
  network: SandboxNetwork;
  /**
   * argv[0] is executed by the exec guard (exec-guard.ts), under the rules given with
   * `restrictExec` before start: by the absolute path the host resolved, never by a PATH search.
   */
  guardExec?: boolean;
  /** No shell of the system exists in the job's filesystem (shell-files.ts). */
  withoutShells?: boolean;
  /**
   * Pseudo-terminals can be opened (a devpts of the sandbox's own, /dev/ptmx and /dev/tty):
   * long-lived sandboxes give their processes terminals. Without it /dev has five harmless devices.
   */
  terminals?: boolean;
  /**
   * The name of the sandbox's user (uid 1000) as its passwd says: `user`, at home in /home/user,
   * as E2B's sandboxes name theirs; `sandbox` (home /tmp) when not given.
   */
  user?: 'sandbox' | 'user';
  /**
   * argv runs as root (uid 0) of the sandbox's own user namespace, where uid 1000 (the user) is
   * mapped too, each to an unprivileged host uid of this sandbox's: a long-lived sandbox's agent,
   * which starts processes as E2B's `user` or `root`. Its root holds only ROOT_INSIDE_CAPABILITIES,
   * which reach nothing but what the two uids own. A backend that cannot give it runs argv as the
   * user (uid 1000), as without it: the program checks its uid.
   */
  rootInside?: boolean;
  /**
   * The sandbox's root file system is an image's, not the host's system: its layers (host
   * directories of the image store, bottom first) under a writable layer of the sandbox's own, of
   * `writableBytes`, gone with the sandbox. The image's files keep their owners as the sandbox
   * sees them (its root owns what the image's root owns). Needs `rootInside`.
   */
  image?: {
    layers: readonly string[];
    writableBytes: number;
    /**
     * A host directory that keeps the writable layer instead (`upper/` in it): a template
     * build's step, whose files become a layer of the image once the sandbox has ended and
     * images/image-root.ts shiftKeptLayer gave them the image's owners back (`ids` beside it).
     */
    keepWritableIn?: string;
  };
  /**
   * Its root is the host's system as with no image, but writable, as an image's is: the system's
   * directories and the host's chosen /etc under a writable layer of its own, on its work dir's
   * file system, so what it writes anywhere counts against the one size and the host's files stay
   * untouched. Needs `rootInside` and `workDir`; a backend that cannot give it keeps the system
   * read-only.
   */
  writableRoot?: boolean;
  /**
   * A program bound at /usr/local/bin/sudo where the sandbox's root is writable and root is inside:
   * the sandbox agent, which serves as E2B's passwordless sudo (sandboxes/agent/sudo.go).
   */
  sudo?: string;
  /**
   * argv starts when the sandbox is made, not at start(): a waiting interpreter that reads its
   * program from stdin, so a pre-started sandbox holds it past its own start-up. A backend may
   * start it at start() instead (slower, the same result); never with egress to connect first.
   */
  startsEarly?: boolean;
  /**
   * argv is the sandbox's init: it reaps what it adopts (the sandbox agent, a subreaper), so it
   * runs as pid 1 of the sandbox's namespace, with no init of the backend's above it. Then all a
   * sandbox runs is its own, and a checkpoint of it (CRIU) holds nothing of the backend's.
   */
  runsAsInit?: boolean;
  /**
   * start() resumes a sandbox a checkpoint() saved, instead of running argv (which must be the
   * argv it was saved running): where its files are not in what was saved (gVisor's host work
   * dir), they are put back first by `home.argv` (a program run in the sandbox, the archive on
   * its stdin); then every process comes back with its memory. Only a backend whose
   * capabilities.pause is `memory` takes it.
   */
  restore?: { image: string; home?: { argv: readonly string[]; archive: string } };
  /**
   * The disk a sandbox of this template was kept on (PreparedSandbox.keepDisk, copyDisk): its
   * work dir and its root's writable layer, as they were, taken up instead of fresh ones; linked
   * where `take` (its keeper drops it once the sandbox runs), else copied.
   */
  fromDisk?: { image: string; take: boolean };
  /**
   * Inside a microVM only (its VM agent sets it, with network `none`): the job stays in the
   * guest's network namespace, whose one link leads to the host's egress proxy of the VM's job and
   * nowhere else (qemu-vm.ts). A backend on the host refuses it: there it would be the host's network.
   */
  vmNetwork?: boolean;
}

/**
 * A checkpoint that did not finish within its deadline: the backend gave it up, and the sandbox
 * may be past saving (gVisor's sentry goes on saving and then ends it; a VM stays stopped), so
 * the caller ends it rather than trust it to run on.
 */
export class CheckpointTimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CheckpointTimeoutError';
  }
}

/** What a guarded job may execute, in sandbox paths; enforced inside it with Landlock. */
export interface ExecRules {
  /** The file argv[0] is executed from, resolved by the host on the sandbox's own PATH. */
  program: string;
  /**
   * `any`, or all that the job and its descendants may execute: the read-only system trees
   * (`system`) and single files. Files the job writes are never executable unless listed.
   */
  executable: 'any' | { system: boolean; files: readonly string[] };
}

/**
 * `none`: a network namespace with loopback only; `{allow}`: egress through user-mode
 * networking; `{proxy}`: HTTP and TLS by name through the host's egress proxy, nothing else.
 */
export type SandboxNetwork = 'none' | Egress | { proxy: ProxiedEgress };

/**
 * A network namespace of its own behind user-mode networking that never reaches the host
 * (job-network.ts). `allow` null: any other address, with DNS; a list: TCP to those host:port
 * pairs only, names pinned in /etc/hosts, no DNS.
 */
export interface Egress {
  allow: readonly EgressTarget[] | null;
}

export interface EgressTarget {
  /** A host name (resolved when the job starts) or an IP address, without brackets. */
  host: string;
  port: number;
}

export interface Mount {
  host: string;
  sandbox: string;
  writable: boolean;
}

export interface StagedFile {
  name: string;
  sandboxPath: string;
  executable: boolean;
}

/**
 * How memory is bounded. `address-space` (RLIMIT_AS) makes allocation fail inside the program,
 * which is what gives python its MemoryError; runtimes that reserve large virtual ranges
 * (V8, Go) cannot start under it and are bounded by the cgroup instead.
 */
export type MemoryMechanism = 'address-space' | 'cgroup';

export interface ResourceLimits {
  memoryBytes: number;
  memoryMechanism: MemoryMechanism;
  maxProcesses: number;
  maxOpenFiles: number;
  maxFileBytes: number;
  /** CPU bandwidth in cores, enforced by the cgroup cpu controller where the host has one. */
  cpuCores?: number;
}

/** Receives a stream's bytes as they arrive; decides itself what to keep. */
export interface OutputSink {
  write(chunk: Buffer): void;
}

export interface SandboxIO {
  timeoutMs: number;
  stdout: OutputSink;
  stderr: OutputSink;
  /** Bytes known up front, or a stream fed to the job as it comes (job-stdin.ts). */
  stdin?: Buffer | string | Readable;
  /** Aborting kills the whole process tree, as a timeout does. */
  signal?: AbortSignal;
}

export interface SandboxOutcome {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  aborted: boolean;
  /** The kernel's OOM killer acted inside the job's memory cgroup. */
  oomKilled: boolean;
  /** What the job's processes used; null where the host does not count it (no cgroup). */
  usage: CgroupUsage;
  /** From start (release) to exit. */
  durationMs: number;
}

/** A running sandbox's use of the host, read from its cgroup and its work dir's file system; null: not counted here. */
export interface LiveUsage {
  cpuMs: number | null;
  memoryBytes: number | null;
  workDirUsedBytes: number | null;
  workDirTotalBytes: number | null;
}

/** Copies a host directory into the work dir (see workspace/snapshot.ts for what is left out). */
export interface WorkspaceImport {
  hostPath: string;
  include?: readonly string[];
  exclude?: readonly string[];
  maxFiles: number;
  maxBytes: number;
}

/** What a work-dir path holds: `other` is a link (on the way or at the end), a FIFO, a device. */
export type WorkPathKind = 'directory' | 'file' | 'missing' | 'other';

/** argv[0] as the sandbox would execute it. */
export interface ResolvedCommand {
  /** The path the sandbox execs. */
  sandboxPath: string;
  /** Links resolved, as the sandbox sees the file (a pinned path matches either). */
  realPath: string;
  /** Digest of the file that would run, for sha256 pins. */
  sha256(): Promise<string>;
  /** Its first bytes, where the kernel reads which interpreter runs it (ELF or `#!`). */
  head(): Promise<Buffer>;
}

export interface ArtifactRequest {
  patterns: readonly string[];
  /** Host directory the collected copies go to (the run store's). */
  storeDir: string;
  maxArtifacts: number;
  maxArtifactBytes: number;
  maxEntriesVisited: number;
}

/**
 * A sandbox whose namespaces and mounts exist, waiting for its files and the go-ahead. Every
 * operation on the job's files goes through it, so a backend whose files live inside a VM
 * implements them over its own channel; callers never see a host path of the work dir.
 */
export interface PreparedSandbox {
  /**
   * Its user namespace's map where the host gives it ids of its own (the pooled uids of a
   * sandbox run as root): its ids inside and the host's they are. A microVM's guest says it to
   * the host, which binds volumes through it (qemu-vm.ts shareVolume). Absent otherwise.
   */
  readonly userIds?: readonly IdRange[];
  writeFile(name: string, content: string | Buffer): Promise<void>;
  copyFile(name: string, hostSource: string): Promise<void>;
  /** Fills the empty work dir from a host directory; rejects with SnapshotError when it cannot. */
  importWorkspace(source: WorkspaceImport): Promise<SnapshotReport>;
  /** What is at a path relative to the work dir, no link followed (a link on the way is `other`). */
  statWorkPath(relativePath: string): Promise<WorkPathKind>;
  /** Where argv[0] would be executed from, or null when the sandbox would not find it. */
  resolveCommand(argv0: string, lookup: { searchPath: readonly string[]; cwd: string }): Promise<ResolvedCommand | null>;
  /**
   * Gives a template made with `guardExec` its exec rules; required before start (the guard
   * refuses to run anything without them). Rejects with SandboxUnavailableError when the host
   * cannot enforce them.
   */
  restrictExec(rules: ExecRules): Promise<void>;
  /** After the run: copies work-dir files matching the patterns out, never following links. */
  collectArtifacts(request: ArtifactRequest): Promise<CollectedArtifacts>;
  /** Runs the job to completion; never leaves a process behind. */
  start(io: SandboxIO): Promise<SandboxOutcome>;
  /** What its processes use now, while it runs (a long-lived sandbox's metrics); absent where the backend cannot say. */
  usageNow?(): Promise<LiveUsage>;
  /**
   * Where the backend keeps memory (capabilities.pause `memory`) for this sandbox: saves every process of the
   * running sandbox, with its memory, into the directory `image`, and the sandbox ends (its
   * start() resolves); past `deadlineMs` it gives up with CheckpointTimeoutError. Any other
   * rejection leaves it running as it was.
   */
  checkpoint?(image: string, deadlineMs: number): Promise<void>;
  /**
   * As checkpoint, but the sandbox goes on running as it was (a fork's or a snapshot's parent,
   * which then need not come back from the image). Absent where the backend cannot.
   */
  checkpointRunning?(image: string, deadlineMs: number): Promise<void>;
  /**
   * A descriptor of its network namespace (the caller closes it), for a host helper to enter
   * (isolation/host/port-relay.ts); throws once it has ended. Absent where the sandbox has none of
   * its own the host may enter (a microVM's guest, gVisor's netstack).
   */
  openNetworkNamespace?(): number;
  /**
   * Mounts the host's file system at `source` (a volume's, volumes/volume-store.ts) at the
   * absolute `path` inside the running sandbox, idmapped to its own ids, its missing directories
   * made; absent where the backend cannot add a mount to a running sandbox.
   */
  attachVolume?(source: string, path: string, readOnly: boolean): Promise<void>;
  /**
   * Where its work dir is a disk of its own: once it has ended and released, that disk (the work
   * dir, its root's writable layer) is kept at `image`, one file, where it is and as it was, not
   * emptied (a pause that keeps files in place; SandboxTemplate.fromDisk takes it up again).
   * Set before it ends (null: not after all, a checkpoint that failed); release() then resolves
   * once it is kept, and rejects if it could not be.
   */
  keepDisk?(image: string | null): void;
  /**
   * Stops every process of it where it is, whatever it does (the cgroup freezer), until thaw();
   * false where that could not be done (it runs on). Absent where the backend cannot.
   */
  freeze?(): Promise<boolean>;
  thaw?(): Promise<void>;
  /** Where keepDisk is: a copy of its disk at `image`, of one instant, while it runs (a fork's, a snapshot's). */
  copyDisk?(image: string): Promise<void>;
  /** Gives the sandbox up without running it. */
  discard(): void;
  /**
   * The caller is done with the work directory (artifacts read); it may now be deleted.
   * Resolves once the sandbox is torn down and its work dir deleted, its blocks the host's again:
   * a job counts as running until then, so the host never holds more than the caps of the jobs
   * it reports running.
   */
  release(): Promise<void>;
}

export interface BackendStatus {
  kind: BackendKind;
  /** The implementation's own name (`local` for bubblewrap). */
  name: string;
  available: boolean;
  /** Why it is unavailable, or what it degrades to (e.g. rlimits without cgroups). */
  notes: string[];
  /** How resource limits are enforced on this host. */
  resourceControl: 'cgroup-v1' | 'cgroup-v2' | 'rlimits-only';
}

/** Sandboxes asked of a backend's warm pool: ready (hit) or made for the job (miss); read by the worker's metrics. */
export interface WarmTakes {
  hit: number;
  miss: number;
}

export interface SandboxBackend {
  readonly kind: BackendKind;
  readonly name: string;
  readonly capabilities: BackendCapabilities;
  /** Counts of its warm pool, for a backend that keeps one. */
  readonly warmTakes?: WarmTakes;
  /** Probes the host: what is missing, or how limits are enforced. */
  status(): Promise<BackendStatus>;
  /**
   * Builds everything it makes on first use that serves every job of the host, not one (probes,
   * a guest image, its accelerator and warm snapshot), each part a step of `progress`; resolves
   * with the status once done, available or not and why. What is built already is only checked.
   */
  prepareHost(progress: PreparationProgress): Promise<BackendStatus>;
  /** Rejects with SandboxUnavailableError when no sandbox can be made here. */
  prepare(template: SandboxTemplate): Promise<PreparedSandbox>;
  /** Kills warm sandboxes and waits for every sandbox's cleanup; running jobs finish first. */
  dispose(): Promise<void>;
}

/** Hears each step of a backend's host preparation (prepareHost) as it starts and ends. */
export interface PreparationProgress {
  step<T>(name: string, work: () => Promise<T>): Promise<T>;
}

/** For a preparation no one watches (a service's, in the background). */
export const UNWATCHED: PreparationProgress = { step: (_name, work) => work() };

/** Nobody listens on the port: E2B's proxy answers such a request 502. */
export class PortClosedError extends Error {
  constructor(
    readonly port: number,
    said: string,
  ) {
    super(`nothing listens on port ${port} of the sandbox${said ? ` (${said})` : ''}`);
    this.name = 'PortClosedError';
  }
}

export class SandboxUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxUnavailableError';
  }
}
