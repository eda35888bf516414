import { spawn } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { lchown } from 'node:fs/promises';
import { join } from 'node:path';
import { buildBwrapArgs, SANDBOX_GID, SANDBOX_UID } from './bwrap-argv.js';
import { detectCgroups, JobCgroup, reapStaleCgroups, type CgroupHost } from './cgroups.js';
import { readHostLayout, type HostLayout } from './host-layout.js';
import { signalGroup } from './process-tree.js';
import { UidPool } from './uid-pool.js';
import { SandboxUnavailableError, type BackendStatus, type SandboxBackend, type SandboxOutcome, type SandboxSpec } from './types.js';

export interface BubblewrapOptions {
  bwrapPath?: string;
  prlimitPath?: string;
  /** Host directory for this backend's own small files (passwd/group for the sandbox). */
  runtimeDir: string;
  /** First of the unprivileged host uids handed to jobs when running as root. */
  uidBase?: number;
  uidCount?: number;
  /** Require per-job cgroups; without them the backend reports itself unavailable. */
  requireCgroups?: boolean;
  tmpBytes?: number;
  shmBytes?: number;
}

const DEFAULTS = {
  bwrapPath: '/usr/bin/bwrap',
  prlimitPath: '/usr/bin/prlimit',
  shPath: '/bin/sh',
  uidBase: 64100,
  uidCount: 256,
  tmpBytes: 256 * 1024 * 1024,
  shmBytes: 64 * 1024 * 1024,
};

/** Moves the launcher into the job's cgroups, then becomes the rest of argv (prlimit, bwrap). */
const JOIN_CGROUPS = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"';

/** After a kill, how long to wait for pipes to close before giving up on them. */
const KILL_GRACE_MS = 2000;

interface Ready {
  layout: HostLayout;
  identityFiles: { passwd: string; group: string };
  cgroups: CgroupHost | null;
}

/**
 * The `local` backend: bubblewrap namespaces, rlimits through prlimit, per-job cgroups
 * when the host has them. As root, jobs run under a pooled unprivileged uid.
 */
export class BubblewrapBackend implements SandboxBackend {
  readonly name = 'local';
  private readonly options: Required<Omit<BubblewrapOptions, 'requireCgroups'>> & { requireCgroups: boolean };
  private readonly uids: UidPool | null;
  private ready: Promise<Ready> | undefined;

  constructor(options: BubblewrapOptions) {
    this.options = { ...DEFAULTS, requireCgroups: false, ...options };
    this.uids = process.getuid?.() === 0 ? new UidPool(this.options.uidBase, this.options.uidCount) : null;
  }

  async status(): Promise<BackendStatus> {
    try {
      const ready = await this.prepare();
      const notes = ready.cgroups
        ? [`per-job cgroups (${ready.cgroups.version}) bound memory and processes`]
        : ['no writable cgroup hierarchy: memory and process limits fall back to rlimits (RLIMIT_AS, RLIMIT_NPROC)'];
      return { name: this.name, available: true, notes, resourceControl: ready.cgroups ? `cgroup-${ready.cgroups.version}` : 'rlimits-only' };
    } catch (error) {
      return { name: this.name, available: false, notes: [(error as Error).message], resourceControl: 'rlimits-only' };
    }
  }

  private prepare(): Promise<Ready> {
    this.ready ??= this.initialise();
    // A failed probe is retried next time: the admin may have installed bwrap meanwhile.
    this.ready.catch(() => (this.ready = undefined));
    return this.ready;
  }

  private async initialise(): Promise<Ready> {
    for (const [tool, path, pkg] of [
      ['bubblewrap', this.options.bwrapPath, 'bubblewrap'],
      ['prlimit', this.options.prlimitPath, 'util-linux'],
    ] as const) {
      try {
        accessSync(path, constants.X_OK);
      } catch {
        throw new SandboxUnavailableError(`${tool} is not installed at ${path}: run scripts/setup-host.sh (or apt-get install ${pkg})`);
      }
    }
    const cgroups = await detectCgroups();
    if (!cgroups && this.options.requireCgroups) throw new SandboxUnavailableError('cgroups are required but no writable memory+pids hierarchy was found');
    if (cgroups) await reapStaleCgroups(cgroups);
    mkdirSync(this.options.runtimeDir, { recursive: true, mode: 0o755 });
    const identityFiles = { passwd: join(this.options.runtimeDir, 'passwd'), group: join(this.options.runtimeDir, 'group') };
    writeFileSync(identityFiles.passwd, `root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:${SANDBOX_UID}:${SANDBOX_GID}:sandbox:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`, { mode: 0o644 });
    writeFileSync(identityFiles.group, `root:x:0:\nsandbox:x:${SANDBOX_GID}:\nnogroup:x:65534:\n`, { mode: 0o644 });
    const ready: Ready = { layout: readHostLayout(), identityFiles, cgroups };
    await this.probeNamespaces(ready);
    return ready;
  }

  /** Fails closed: if namespaces cannot be created here, no job runs at all. */
  private async probeNamespaces(ready: Ready): Promise<void> {
    const spec: SandboxSpec = {
      argv: ['/usr/bin/true'],
      cwd: '/tmp/probe',
      env: {},
      mounts: [],
      network: 'none',
      limits: { timeoutMs: 10_000, memoryBytes: 64 * 1024 * 1024, memoryMechanism: 'cgroup', maxProcesses: 8, maxOpenFiles: 64, maxFileBytes: 1024 * 1024 },
      stdout: { write: () => undefined },
      stderr: { write: (chunk) => errors.push(chunk) },
    };
    const errors: Buffer[] = [];
    const outcome = await this.launch(spec, ready);
    if (outcome.exitCode !== 0) {
      const reason = Buffer.concat(errors).toString('utf8').trim() || `exit code ${outcome.exitCode}`;
      throw new SandboxUnavailableError(`bubblewrap cannot create namespaces on this host (${reason}); user namespaces may be disabled`);
    }
  }

  async run(spec: SandboxSpec): Promise<SandboxOutcome> {
    return this.launch(spec, await this.prepare());
  }

  private async launch(spec: SandboxSpec, ready: Ready): Promise<SandboxOutcome> {
    const uid = this.uids ? await this.uids.acquire() : null;
    let cgroup: JobCgroup | null = null;
    try {
      if (ready.cgroups) {
        // Under RLIMIT_AS the program fails its own allocations first; the cgroup is the
        // backstop for the sum over all its processes.
        const memoryBytes = spec.limits.memoryMechanism === 'address-space' ? Math.ceil(spec.limits.memoryBytes * 1.25) : spec.limits.memoryBytes;
        cgroup = await JobCgroup.create(ready.cgroups, { memoryBytes, maxProcesses: spec.limits.maxProcesses }, uid);
      }
      // Writable mounts belong to the job's uid for the job's lifetime.
      if (uid !== null) for (const mount of spec.mounts) if (mount.writable) await lchown(mount.host, uid, uid);
      return await this.spawnAndWait(spec, ready, uid, cgroup);
    } finally {
      await cgroup?.killAll();
      await cgroup?.dispose();
      if (uid !== null) this.uids!.release(uid);
    }
  }

  private meminfoFor(memoryBytes: number): string {
    const path = join(this.options.runtimeDir, `meminfo-${memoryBytes}`);
    if (!existsSync(path)) {
      const kib = Math.floor(memoryBytes / 1024);
      const lines = [['MemTotal', kib], ['MemFree', kib], ['MemAvailable', kib], ['Buffers', 0], ['Cached', 0], ['SwapCached', 0], ['SwapTotal', 0], ['SwapFree', 0], ['Shmem', 0]];
      const tmp = `${path}.${process.pid}.tmp`;
      writeFileSync(tmp, lines.map(([key, value]) => `${`${key}:`.padEnd(16)}${String(value).padStart(8)} kB\n`).join(''), { mode: 0o644 });
      renameSync(tmp, path);
    }
    return path;
  }

  /** The launcher chain, outermost first: [sh join-cgroups] -> prlimit -> bwrap -> job. */
  private launcherArgv(spec: SandboxSpec, ready: Ready, cgroup: JobCgroup | null): string[] {
    const { limits } = spec;
    const rlimits = [
      `--nofile=${limits.maxOpenFiles}`,
      `--fsize=${limits.maxFileBytes}`,
      '--core=0',
      `--nproc=${limits.maxProcesses}`,
      ...(limits.memoryMechanism === 'address-space' ? [`--as=${limits.memoryBytes}`] : []),
    ];
    const bwrapArgs = buildBwrapArgs({
      layout: ready.layout,
      identityFiles: ready.identityFiles,
      meminfo: this.meminfoFor(limits.memoryBytes),
      argv: spec.argv,
      cwd: spec.cwd,
      env: spec.env,
      mounts: spec.mounts,
      network: spec.network,
      tmpBytes: this.options.tmpBytes,
      shmBytes: this.options.shmBytes,
    });
    const chain = [this.options.prlimitPath, ...rlimits, '--', this.options.bwrapPath, ...bwrapArgs];
    return cgroup ? [DEFAULTS.shPath, '-c', JOIN_CGROUPS, 'sh', ...cgroup.procsFiles(), '--', ...chain] : chain;
  }

  private spawnAndWait(spec: SandboxSpec, ready: Ready, uid: number | null, cgroup: JobCgroup | null): Promise<SandboxOutcome> {
    const [command, ...args] = this.launcherArgv(spec, ready, cgroup);
    const started = performance.now();
    return new Promise<SandboxOutcome>((resolve, reject) => {
      const child = spawn(command!, args, {
        detached: true,
        env: {},
        stdio: [spec.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
        ...(uid !== null ? { uid, gid: uid } : {}),
      });
      let timedOut = false;
      let aborted = false;
      let settled = false;
      let graceTimer: NodeJS.Timeout | undefined;

      const killTree = () => {
        if (child.pid !== undefined) signalGroup(child.pid, 'SIGKILL');
        void cgroup?.killAll();
        // Pipes normally close as the tree dies; if a writer somehow survives, stop reading.
        graceTimer ??= setTimeout(() => {
          child.stdout?.destroy();
          child.stderr?.destroy();
        }, KILL_GRACE_MS);
      };
      const timer = setTimeout(() => {
        timedOut = true;
        killTree();
      }, spec.limits.timeoutMs);
      const onAbort = () => {
        aborted = true;
        killTree();
      };
      if (spec.signal?.aborted) onAbort();
      spec.signal?.addEventListener('abort', onAbort, { once: true });

      child.stdout!.on('data', (chunk: Buffer) => spec.stdout.write(chunk));
      child.stderr!.on('data', (chunk: Buffer) => spec.stderr.write(chunk));
      if (child.stdin) {
        // A job that exits without reading its stdin closes the pipe under us: not our error.
        child.stdin.on('error', () => undefined);
        child.stdin.end(spec.stdin);
      }

      const finish = (outcome: SandboxOutcome | Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        clearTimeout(graceTimer);
        spec.signal?.removeEventListener('abort', onAbort);
        if (outcome instanceof Error) reject(outcome);
        else resolve(outcome);
      };
      child.on('error', (error) => finish(new SandboxUnavailableError(`could not start the sandbox: ${error.message}`)));
      child.on('close', (code, signal) => {
        const durationMs = performance.now() - started;
        void (async () => {
          const oomKilled = (await cgroup?.oomKilled()) ?? false;
          finish({ exitCode: code, signal, timedOut, aborted, oomKilled, durationMs });
        })();
      });
    });
  }
}
