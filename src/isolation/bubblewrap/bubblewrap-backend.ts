import { closeSync, existsSync, openSync, readSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { buildBwrapArgs, SANDBOX_UID } from './bwrap-argv.js';
import { writeSystemRoot } from '../host/system-root.js';
import { IMAGE_IDS, imageRootArgv, layersHoldPasswd, type ImageRootMount } from '../../images/image-root.js';
import { replaceFile } from '../host/shared-files.js';
import { JobCgroup } from '../host/cgroups.js';
import type { BackendCapabilities } from '../../contract/backend.js';
import { HostWorkDir } from '../host/host-work-dir.js';
import { baseEnvironment } from '../profiles.js';
import { ARGS_FD, BOOT_ID_FILE, INFO_FD, LaunchedSandbox, RELEASE_FD, SECCOMP_FD, STATUS_FD, USERNS_FD } from './launched-sandbox.js';
import type { EgressHostOptions } from '../../egress/policy.js';
import { DEFAULT_NETWORK_TOOLS, JobNetwork, RESOLVER_FILES, type NetworkTools } from '../host/job-network.js';
import type { AttachedNetwork } from '../host/netns-helpers.js';
import { CA_BUNDLE_FILE, ProxiedNetwork } from '../host/proxied-network.js';
import type { NetworkFiles } from './bwrap-argv.js';
import { meminfoText } from './meminfo.js';
import { EXEC_GUARD_MOUNT, EXEC_RULES_FILE, EXEC_RULES_SANDBOX_PATH, guardedArgv } from './exec-guard.js';
import { egressMissing, probeHost, probeNamespaces, type BubblewrapHost } from './host-probe.js';
import { ownedName } from '../host/owned-dirs.js';
import { forkWhenQuiet } from '../../util/fork-gate.js';
import type { WorkDirLease } from '../host/work-dir-pool.js';
import { HostDirJobs } from '../host-dir-jobs.js';
import { createStagedFile } from '../host/staged-files.js';
import { UidPool } from '../host/uid-pool.js';
import { CRIU_PATH, probeCriu, restoreArgv, TOOLS_PATH } from '../host/criu.js';
import type { IdRange } from '../../util/id-ranges.js';
import { WarmPool } from './warm-pool.js';
import {
  SandboxUnavailableError,
  type BackendStatus,
  type Mount,
  type PreparationProgress,
  type PreparedSandbox,
  type SandboxBackend,
  type SandboxTemplate,
  type WarmTakes,
} from '../types.js';

export interface BubblewrapOptions {
  bwrapPath?: string;
  prlimitPath?: string;
  /** Host directory for this backend's own files (passwd/group, meminfo, per-job staging). */
  runtimeDir: string;
  /** First of the unprivileged host uids handed to jobs when running as root. */
  uidBase?: number;
  uidCount?: number;
  /** Where processes on this host claim uids from the shared range (lock files). */
  uidLockDir?: string;
  /** First of the blocks of IMAGE_IDS host uids handed to sandboxes on images, one block each. */
  imageUidBase?: number;
  imageUidBlocks?: number;
  /** Require per-job cgroups; without them the backend reports itself unavailable. */
  requireCgroups?: boolean;
  tmpBytes?: number;
  shmBytes?: number;
  /** Apply the syscall filter (seccomp.ts); where it cannot be applied the backend is unavailable. */
  seccomp?: boolean;
  /** Pre-started sandboxes kept per template (0 disables), for the most recent `warmTemplates` templates. */
  warmPerTemplate?: number;
  warmTemplates?: number;
  /** The programs that give a job egress (job-network.ts); without them such jobs are unavailable. */
  networkTools?: NetworkTools;
  /** How every job's egress proxy resolves names and which upstream roots it trusts (proxied-network.ts). */
  egress?: EgressHostOptions;
  /** This backend is the VM agent's, inside a microVM, whose network namespace is the VM's: it may keep a job there (`vmNetwork`). */
  vmGuest?: boolean;
  /** The CRIU that saves sandboxes with their memory (criu.ts); where it is absent they pause with their files only. */
  criuPath?: string;
}

const DEFAULTS = {
  bwrapPath: '/usr/bin/bwrap',
  prlimitPath: '/usr/bin/prlimit',
  shPath: '/bin/sh',
  uidBase: 64100,
  uidCount: 256,
  // Far above the single uids and the /etc/subuid ranges useradd hands out (from 100,000).
  imageUidBase: 1_000_000_000,
  imageUidBlocks: 256,
  // Host-wide, whatever each process's state dir: every agent-runner here shares the range.
  uidLockDir: '/run/agent-runner/uids',
  tmpBytes: 256 * 1024 * 1024,
  shmBytes: 64 * 1024 * 1024,
  warmPerTemplate: 2,
  warmTemplates: 8,
  requireCgroups: false,
  seccomp: true,
  networkTools: DEFAULT_NETWORK_TOOLS,
  egress: {},
  vmGuest: false,
  criuPath: CRIU_PATH,
};

/**
 * Before a restore by CRIU, in the launcher's mount namespace: the sandbox's root bound again
 * without what is mounted beneath it (its /usr), which CRIU binds whole as the restored root
 * (a root with mounts beneath cannot be bound alone in the sandbox's user namespace), then CRIU.
 */
const BARE_ROOT = `export PATH=${TOOLS_PATH}; mkdir -m 0755 "$2" && mount --bind "$1" "$2" && shift 3 && exec "$@"`;

/**
 * Moves the launcher into the job's cgroups, then becomes the rest of argv (prlimit, bwrap).
 * The shell exports PWD; unset, so bwrap's own environment (visible as the sandbox's
 * /proc/1/environ) stays empty.
 */
const JOIN_CGROUPS = 'unset PWD OLDPWD; while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"';

/**
 * The `local` backend: bubblewrap namespaces, rlimits through prlimit, per-job cgroups when
 * the host has them. As root, jobs run under a pooled unprivileged uid. Sandboxes for recent
 * templates are started ahead of need and wait, fully set up, for their job.
 */
export class BubblewrapBackend implements SandboxBackend {
  readonly kind = 'local_process';
  readonly name = 'local';
  readonly warmTakes: WarmTakes = { hit: 0, miss: 0 };
  readonly capabilities: BackendCapabilities;
  private readonly options: Required<BubblewrapOptions>;
  private readonly uids: UidPool | null;
  private readonly imageUids: UidPool | null;
  private readonly warm: WarmPool<LaunchedSandbox>;
  private readonly refilling = new Set<string>();
  private readonly jobs: HostDirJobs;
  private ready: Promise<BubblewrapHost> | undefined;
  /**
   * The lowest layer of the sandboxes' writable roots of the host's system (system-root.ts):
   * written when the first such sandbox is launched, not at the probe, which every run job's
   * process makes (some 100 ms of copying /etc's chosen entries).
   */
  private systemRoot: string | undefined;
  private disposed = false;
  /**
   * The CRIU that saves a sandbox with its memory, where there is one and root here: then a
   * long-lived sandbox on the host's writable system, without egress, pauses, forks and is
   * snapshotted with its processes (LaunchParts.criu).
   */
  private readonly criu: string | null;

  constructor(options: BubblewrapOptions) {
    this.options = { ...DEFAULTS, ...options };
    this.uids = process.getuid?.() === 0 ? new UidPool(this.options.uidBase, this.options.uidCount, this.options.uidLockDir) : null;
    this.imageUids = this.uids && new UidPool(this.options.imageUidBase, this.options.imageUidBlocks, this.options.uidLockDir, IMAGE_IDS);
    this.criu = this.uids !== null && !this.options.vmGuest && existsSync(this.options.criuPath) ? this.options.criuPath : null;
    this.capabilities = {
      network: ['none', 'egress', 'proxy', 'host'],
      memory: ['cgroup', 'address-space'],
      snapshot: false,
      pause: this.criu ? 'memory' : 'files',
      // A second pooled uid, the map written from outside, and the seccomp filter (rootInside in types.ts).
      root_inside: this.uids !== null && this.options.seccomp,
      host_work_dir: true,
      // Mounting into another namespace takes root here.
      volumes: this.uids !== null ? 'attach' : 'none',
      profiles: ['snippet', 'task', 'run-job', 'workspace'],
    };
    this.warm = new WarmPool(this.options.warmPerTemplate, this.options.warmTemplates);
    this.jobs = new HostDirJobs(this.options.runtimeDir);
  }

  async status(): Promise<BackendStatus> {
    try {
      const ready = await this.whenReady();
      const notes = [
        ready.cgroups
          ? `per-job cgroups (${ready.cgroups.version}) bound memory and processes`
          : 'no writable cgroup hierarchy: memory and process limits fall back to rlimits (RLIMIT_AS, RLIMIT_NPROC)',
        ready.seccompFile ? 'seccomp syscall filter applied' : 'seccomp syscall filter disabled by configuration',
        ready.landlockAbi > 0
          ? `Landlock ABI ${ready.landlockAbi}: run jobs' exec rules (allow_shell, allowed_commands) enforced inside the job`
          : 'no Landlock in this kernel: run jobs that restrict execution (allow_shell false, allowed_commands) cannot run',
        egressMissing('pasta', this.options.networkTools) ?? 'jobs with network get a namespace of their own behind pasta, filtered by nftables',
        egressMissing('proxy', this.options.networkTools) ?? 'jobs with allow_domains reach HTTP and TLS by name through an egress proxy on the host, nothing else',
        await this.criuNote(),
      ];
      return { kind: this.kind, name: this.name, available: true, notes, resourceControl: ready.cgroups ? `cgroup-${ready.cgroups.version}` : 'rlimits-only' };
    } catch (error) {
      return { kind: this.kind, name: this.name, available: false, notes: [(error as Error).message], resourceControl: 'rlimits-only' };
    }
  }

  /** What pausing a long-lived sandbox keeps here: its memory too, by CRIU, or its files only, and why. */
  private async criuNote(): Promise<string> {
    if (this.uids === null) return 'not root here: long-lived sandboxes pause with their files only (CRIU needs root)';
    const found = await probeCriu(this.options.criuPath);
    if ('why' in found) return found.why;
    return `CRIU at ${found.path}: long-lived sandboxes without egress pause, fork and snapshot with their processes' memory`;
  }

  /** Its host probe (a sandbox run with every mechanism): warm sandboxes are made per template, by jobs. */
  prepareHost(progress: PreparationProgress): Promise<BackendStatus> {
    return progress.step('host probe', () => this.status());
  }

  async prepare(template: SandboxTemplate): Promise<PreparedSandbox> {
    const ready = await this.whenReady();
    // Never the host's network instead: without its tools a job asking for egress does not run.
    const noEgress = template.network === 'none' ? null : egressMissing('proxy' in template.network ? 'proxy' : 'pasta', this.options.networkTools);
    if (noEgress) throw new SandboxUnavailableError(noEgress);
    if (template.vmNetwork && (!this.options.vmGuest || template.network !== 'none'))
      throw new Error("a job keeps its namespace's network only inside a microVM, with network none");
    // A compiler's writable output dir belongs to one job, and so do a proxied job's placeholders
    // and secrets, and a kept disk: such templates are never pre-started.
    const ownsParts =
      template.mounts.some((mount) => mount.writable) ||
      template.volumes !== undefined ||
      (template.network !== 'none' && 'proxy' in template.network) ||
      template.fromDisk !== undefined;
    const key = ownsParts || this.options.warmPerTemplate === 0 ? null : JSON.stringify(template);
    let sandbox = key === null ? undefined : this.warm.take(key);
    if (key !== null) this.warmTakes[sandbox ? 'hit' : 'miss'] += 1;
    if (sandbox && !sandbox.alive) sandbox = undefined;
    // The replacement is started once this job is over, so its setup does not compete with
    // the job for CPU (and the event loop) while the caller waits; and only for a template
    // seen before, so one-off commands do not pay for a sandbox no one will use.
    const refill = key === null || !this.warm.noteUse(key) ? undefined : () => void this.refill(key, template, ready);
    return sandbox ?? this.launch(template, ready, await this.acquireUids(template, ready, true), { onFinished: refill });
  }

  /** Kills the warm sandboxes and waits until every sandbox has cleaned up (work-dir mounts included). */
  async dispose(): Promise<void> {
    this.disposed = true;
    this.warm.drain();
    await this.jobs.dispose();
  }

  private whenReady(): Promise<BubblewrapHost> {
    this.ready ??= this.initialise();
    // A failed probe is retried next time: the admin may have installed bwrap meanwhile.
    this.ready.catch(() => (this.ready = undefined));
    return this.ready;
  }

  /** The host probed, then a sandbox run on it. */
  private async initialise(): Promise<BubblewrapHost> {
    const ready = await probeHost(this.options);
    await probeNamespaces(async (template) => this.launch(template, ready, await this.acquireUids(template, ready, true)));
    return ready;
  }

  /** Keeps `warmPerTemplate` sandboxes of this template waiting; skipped when uids run short. */
  private async refill(key: string, template: SandboxTemplate, ready: BubblewrapHost): Promise<void> {
    if (this.refilling.has(key)) return;
    this.refilling.add(key);
    try {
      while (!this.disposed && this.warm.shortfall(key) > 0) {
        const uids = await this.acquireUids(template, ready, false);
        if (uids === undefined) return;
        const sandbox: LaunchedSandbox = await this.launch(template, ready, uids, {
          // Called only after launch returned, when `sandbox` is set.
          onIdleDeath: () => this.warm.remove(key, sandbox),
          // Replaced after its job, or after dying idle; not once evicted: refilling an evicted key
          // would evict the next, whose refill evicts the next, round all the keys for ever.
          onFinished: () => {
            if (this.warm.keeps(key)) void this.refill(key, template, ready);
          },
        });
        this.warm.add(key, sandbox);
      }
    } catch {
      // Warming is an optimisation: a failure here shows up, with its reason, on the cold path.
    } finally {
      this.refilling.delete(key);
    }
  }

  /**
   * The host uids a sandbox of `template` runs as (null: not root here, no pool): the user's, and
   * root's when it has root inside (rootInside, only with the seccomp filter: bwrap-argv.ts); for
   * one on an image, a block of IMAGE_IDS, the image's ids from 0.
   * `wait`: until they are free (a job, which holds the first while it waits for the second: the
   * pool has 256, far above the sandboxes that run at once); otherwise all now or none (warming).
   */
  private async acquireUids(template: SandboxTemplate, ready: BubblewrapHost, wait: true): Promise<JobUids>;
  private async acquireUids(template: SandboxTemplate, ready: BubblewrapHost, wait: false): Promise<JobUids | undefined>;
  private async acquireUids(template: SandboxTemplate, ready: BubblewrapHost, wait: boolean): Promise<JobUids | undefined> {
    const rootInside = template.rootInside === true && ready.seccompFile !== null;
    if (template.image && rootInside && this.imageUids) {
      const block = await this.acquireFrom(this.imageUids, wait);
      if (block === undefined) return undefined;
      const ids = [{ inside: 0, host: block, count: IMAGE_IDS }];
      return { user: block + SANDBOX_UID, root: block, ids, release: () => this.imageUids!.release(block), setAside: () => this.imageUids!.setAside(block) };
    }
    const user = this.uids && (await this.acquireFrom(this.uids, wait));
    if (user === undefined) return undefined;
    if (user === null || !rootInside) {
      return { user, root: null, ids: null, release: () => user !== null && this.uids!.release(user), setAside: () => user !== null && this.uids!.setAside(user) };
    }
    const root = await this.acquireFrom(this.uids!, wait);
    if (root === undefined) {
      this.uids!.release(user);
      return undefined;
    }
    const ids = [
      { inside: 0, host: root, count: 1 },
      { inside: SANDBOX_UID, host: user, count: 1 },
    ];
    return {
      user,
      root,
      ids,
      release: () => {
        this.uids!.release(user);
        this.uids!.release(root);
      },
      setAside: () => {
        this.uids!.setAside(user);
        this.uids!.setAside(root);
      },
    };
  }

  private async acquireFrom(pool: UidPool, wait: boolean): Promise<number | undefined> {
    const uid = wait ? await pool.acquire() : pool.tryAcquire(false);
    if (uid !== undefined) await pool.ready(uid);
    return uid;
  }

  private async launch(
    template: SandboxTemplate,
    ready: BubblewrapHost,
    uids: JobUids,
    hooks: { onIdleDeath?: () => void; onFinished?: () => void } = {},
  ): Promise<LaunchedSandbox> {
    let cgroup: JobCgroup | null = null;
    let lease: WorkDirLease | null = null;
    let settleCleanup: (() => void) | null = null;
    const { user: uid, root: rootUid, release } = uids;
    // The launcher (bwrap) runs as the uid its namespace maps to the job's first identity: root
    // inside when there is one, else the user. The user's uid owns the work dir either way.
    const launchUid = rootUid ?? uid;
    // Its ids inside and the host's: with no root inside, the user alone, mapped to its pooled uid.
    const userIds = uids.ids ?? (uid !== null ? [{ inside: SANDBOX_UID, host: uid, count: 1 }] : null);
    try {
      const { limits } = template;
      if (ready.cgroups) {
        // Under RLIMIT_AS the program fails its own allocations first; the cgroup is the
        // backstop for the sum over all its processes.
        const memoryBytes = limits.memoryMechanism === 'address-space' ? Math.ceil(limits.memoryBytes * 1.25) : limits.memoryBytes;
        cgroup = await JobCgroup.create(ready.cgroups, { memoryBytes, maxProcesses: limits.maxProcesses, cpuCores: limits.cpuCores ?? null }, launchUid);
      }
      if (uid !== null) await this.jobs.handWritableMounts(template, uid);
      const stagingDir = join(this.options.runtimeDir, 'jobs', ownedName());
      await mkdir(stagingDir, { mode: 0o755 });
      const stagedFiles = new Map<string, string>();
      const fileMounts: Mount[] = [];
      let workDir: string | null = null;
      // A writable root of the host's system needs root here and inside: its layers are mounted
      // as root, idmapped to the sandbox's two uids.
      const writableRoot = template.writableRoot === true && template.image === undefined && uids.ids !== null && template.workDir !== undefined;
      if (template.workDir !== undefined) {
        if (uid !== null) {
          // Root can give the work dir its own size-limited file system; otherwise only
          // RLIMIT_FSIZE bounds a single file.
          // Its ids go with its disk, should it be kept: a later sandbox on it has others.
          lease = await this.jobs.leaseWorkDir(template, uid, { withLayer: writableRoot, ids: userIds! });
          workDir = lease.path;
        } else {
          workDir = join(stagingDir, 'work');
          await mkdir(workDir, { mode: 0o755 });
        }
        fileMounts.push({ host: workDir, sandbox: template.workDir, writable: true });
      }
      const files = template.guardExec ? [...template.files, { name: EXEC_RULES_FILE, sandboxPath: EXEC_RULES_SANDBOX_PATH, executable: false }] : template.files;
      if (template.guardExec) fileMounts.push(EXEC_GUARD_MOUNT);
      const stage = async (name: string, mode: number): Promise<string> => {
        const host = join(stagingDir, name);
        await createStagedFile(host, mode);
        stagedFiles.set(name, host);
        return host;
      };
      for (const file of files) {
        fileMounts.push({ host: await stage(file.name, file.executable ? 0o755 : 0o644), sandbox: file.sandboxPath, writable: false });
      }
      let network: AttachedNetwork | null = null;
      let networkFiles: NetworkFiles | null = null;
      if (template.network !== 'none') {
        networkFiles = { hosts: await stage(RESOLVER_FILES.hosts, 0o644), resolvConf: await stage(RESOLVER_FILES.resolvConf, 0o644) };
        if ('proxy' in template.network) {
          const { proxy } = template.network;
          if (proxy.secrets.length > 0) networkFiles.caBundle = await stage(CA_BUNDLE_FILE, 0o644);
          network = new ProxiedNetwork(proxy, this.options.networkTools, join(stagingDir, 'egress.sock'), this.options.egress);
        } else {
          const pidFile = join(stagingDir, 'pasta.pid');
          await writeFile(pidFile, '', { mode: 0o600, flag: 'wx' });
          network = new JobNetwork(template.network, this.options.networkTools, pidFile);
        }
      }
      let imageRoot: ImageRootMount | null = null;
      if (template.image) {
        // The image's layers, idmapped to the sandbox's two uids, under its own writable layer:
        // mounted by the launcher as root, in a mount namespace of its own (image-root.c).
        if (uids.ids === null) throw new Error('a sandbox on an image needs root inside (the service running as root, with seccomp)');
        const target = join(stagingDir, 'root');
        await mkdir(target, { mode: 0o755 });
        const { layers, writableBytes, keepWritableIn } = template.image;
        imageRoot = { target, layers, writableBytes, ids: uids.ids, ...(keepWritableIn && { keepWritableIn }) };
      } else if (writableRoot && lease?.layer && uids.ids) {
        // The host's system as the layers of an image, its writable layer beside the work dir.
        const target = join(stagingDir, 'root');
        await mkdir(target, { mode: 0o755 });
        this.systemRoot ??= writeSystemRoot(this.options.runtimeDir, ready.layout);
        imageRoot = { target, layers: [this.systemRoot], writableBytes: 0, keepWritableIn: lease.layer, ids: uids.ids, systemDirs: ready.layout.directories };
      }
      const bootId = join(stagingDir, BOOT_ID_FILE);
      await writeFile(bootId, `${kernelUuid()}\n`, { mode: 0o644, flag: 'wx' });
      const settled = this.jobs.oweCleanup();
      // Settled by the sandbox once it has cleaned up, or below if it cannot be launched.
      settleCleanup = settled;
      // Under cgroup v2 only root may move a process out of the root group: the launcher starts
      // as root and takes the job's uid once inside (launcherArgv).
      const joinsAsRoot = launchUid !== null && cgroup !== null && ready.cgroups?.version === 'v2';
      // Saved by CRIU where its init is its own, its root the launcher's mount and nothing of it
      // outside (egress): the same kind of sandbox is what a checkpoint comes back into.
      const saveable = this.criu !== null && imageRoot !== null && network === null && template.runsAsInit === true && uids.ids !== null;
      const { restore } = template;
      if (restore && (!saveable || restore.home))
        throw new SandboxUnavailableError('this sandbox cannot be restored with its memory here: it needs CRIU, a writable root, its disk and no egress');
      const { argv, bwrapOptions } = restore
        ? {
            argv: await this.restorerArgv(
              restore.image,
              imageRoot!,
              stagingDir,
              workDir && template.workDir ? { host: workDir, inside: template.workDir } : null,
              uids.ids!,
              cgroup,
            ),
            bwrapOptions: [],
          }
        : this.launcherArgv(template, [...template.mounts, ...fileMounts], networkFiles, bootId, ready, cgroup, joinsAsRoot ? launchUid : null, rootUid !== null, imageRoot);
      return await forkWhenQuiet(
        () =>
          new LaunchedSandbox({
            argv,
            bwrapOptions,
            // A restore gets back the filter its processes had, with them.
            seccompFile: restore ? null : ready.seccompFile,
            // The image root's launcher mounts as root, then becomes the uid itself.
            uid: joinsAsRoot || imageRoot ? null : launchUid,
            userMap: restore ? null : uids.ids,
            userIds,
            cgroup,
            jobDir: stagingDir,
            stagedFiles,
            workDir,
            files: new HostWorkDir(workDir, template.workDir ?? null, uid),
            execRules: template.guardExec ? { landlockAbi: ready.landlockAbi, systemTrees: ready.layout.directories } : null,
            releaseWorkDir: lease ? lease.release : null,
            disk: lease?.disk ?? null,
            network,
            bwrapStatus: !restore,
            ...(saveable && { criu: this.criu! }),
            restoring: restore !== undefined,
            ownNetwork: template.vmNetwork !== true && !this.options.vmGuest,
            onFinished: () => {
              release();
              settled();
              hooks.onFinished?.();
            },
            ...(hooks.onIdleDeath ? { onIdleDeath: hooks.onIdleDeath } : {}),
            onForkRefused: uids.setAside,
            startsEarly: template.startsEarly === true && network === null,
          }),
      );
    } catch (error) {
      settleCleanup?.();
      await cgroup?.dispose();
      await lease?.release();
      release();
      throw error;
    }
  }

  /**
   * The launcher chain, outermost first: [sh join-cgroups] -> [setpriv] -> prlimit -> bwrap ->
   * job. bwrap's options travel through a pipe (ARGS_FD), only the job's argv stays on the
   * command line. setpriv gives `becomeUid` to a launcher that joined its cgroups as root.
   */
  private launcherArgv(
    template: SandboxTemplate,
    mounts: readonly Mount[],
    networkFiles: NetworkFiles | null,
    bootId: string,
    ready: BubblewrapHost,
    cgroup: JobCgroup | null,
    becomeUid: number | null,
    rootInside: boolean,
    imageRoot: ImageRootMount | null,
  ): { argv: string[]; bwrapOptions: string[] } {
    const { limits } = template;
    const rlimits = [
      `--nofile=${limits.maxOpenFiles}`,
      `--fsize=${limits.maxFileBytes}`,
      '--core=0',
      `--nproc=${limits.maxProcesses}`,
      ...(limits.memoryMechanism === 'address-space' ? [`--as=${limits.memoryBytes}`] : []),
    ];
    const bwrapArgs = buildBwrapArgs({
      layout: ready.layout,
      // An image that names its users keeps its own files of them.
      identityFiles: imageRoot && layersHoldPasswd(imageRoot.layers) ? null : ready.identityFiles[template.user ?? 'sandbox'],
      meminfo: this.meminfoFor(limits.memoryBytes),
      bootId,
      argv: template.guardExec ? guardedArgv(template.argv) : template.argv,
      cwd: template.cwd,
      // The proxy's variables last: a job's own HTTPS_PROXY would lead nowhere.
      env: {
        ...baseEnvironment(template.profile),
        ...template.env,
        ...(template.network !== 'none' && 'proxy' in template.network ? ProxiedNetwork.environment(template.network.proxy) : {}),
      },
      mounts,
      ...(template.volumes && { volumes: template.volumes }),
      networkFiles,
      loopbackHosts: ready.loopbackHosts,
      ...(imageRoot && { imageRoot: `${imageRoot.target}/merged` }),
      // Where the root is the sandbox's own and has root inside, the template's sudo.
      ...(imageRoot && rootInside && template.sudo !== undefined && { sudo: template.sudo }),
      vmNetwork: template.vmNetwork === true,
      hidden: template.withoutShells ? ready.shellFiles : [],
      terminals: template.terminals === true,
      asInit: template.runsAsInit === true,
      tmpBytes: this.options.tmpBytes,
      shmBytes: this.options.shmBytes,
      blockFd: RELEASE_FD,
      statusFd: STATUS_FD,
      ...(networkFiles || rootInside ? { infoFd: INFO_FD } : {}),
      ...(rootInside ? { rootInside: { usernsBlockFd: USERNS_FD } } : {}),
      ...(ready.seccompFile ? { seccompFd: SECCOMP_FD } : {}),
    });
    const split = bwrapArgs.indexOf('--');
    const limited = [this.options.prlimitPath, ...rlimits, '--', this.options.bwrapPath, '--args', String(ARGS_FD), ...bwrapArgs.slice(split)];
    const chain = imageRoot ? [...imageRootArgv(imageRoot), ...limited] : limited;
    if (!cgroup) return { argv: chain, bwrapOptions: bwrapArgs.slice(0, split) };
    const become = becomeUid === null || imageRoot ? [] : [this.options.networkTools.setpriv, `--reuid=${becomeUid}`, `--regid=${becomeUid}`, '--clear-groups', '--'];
    const argv = [DEFAULTS.shPath, '-c', JOIN_CGROUPS, 'sh', ...cgroup.procsFiles(), '--', ...become, ...chain];
    return { argv, bwrapOptions: bwrapArgs.slice(0, split) };
  }

  /**
   * The launcher chain of a restore: [sh join-cgroups] -> image-root (the root and its disk set up as
   * for any sandbox, CRIU staying the host's root) -> sh (the bare root) -> `criu restore` of
   * `image` as this sandbox (criu.ts restoreArgv), which makes the namespaces itself.
   */
  private async restorerArgv(
    image: string,
    imageRoot: ImageRootMount,
    jobDir: string,
    workDir: { host: string; inside: string } | null,
    ids: readonly IdRange[],
    cgroup: JobCgroup | null,
  ): Promise<string[]> {
    const bare = join(imageRoot.target, 'bare');
    const criu = await restoreArgv(this.criu!, image, { jobDir, workDir, ids, root: bare, bootIdFile: join(jobDir, BOOT_ID_FILE) });
    const chain = [...imageRootArgv({ ...imageRoot, execAsHostRoot: true }), DEFAULTS.shPath, '-c', BARE_ROOT, 'sh', join(imageRoot.target, 'merged'), bare, '--', ...criu];
    return cgroup ? [DEFAULTS.shPath, '-c', JOIN_CGROUPS, 'sh', ...cgroup.procsFiles(), '--', ...chain] : chain;
  }

  private meminfoFor(memoryBytes: number): string {
    const path = join(this.options.runtimeDir, `meminfo-${memoryBytes}`);
    if (!existsSync(path)) replaceFile(path, meminfoText(memoryBytes));
    return path;
  }
}

/** The host uids of one sandbox: its user's, and its root's when it has root inside (null: none, or not root here). */
interface JobUids {
  user: number | null;
  root: number | null;
  /** The user namespace's map, written from outside when root is inside (null: bwrap's own, the user alone). */
  ids: readonly IdRange[] | null;
  /** Gives the uids back to their pool. */
  release(): void;
  /** Keeps them from every later sandbox (UidPool.setAside): the kernel refused a fork to them. */
  setAside(): void;
}

/**
 * A random UUID (version 4) from the kernel's generator, not node's: in a microVM's guest, which
 * runs this backend, node's generator state is that of the snapshot every VM is restored from,
 * while the kernel's is reseeded for each job (microvm/agent/reseed-random.py).
 */
function kernelUuid(): string {
  const bytes = Buffer.alloc(16);
  const fd = openSync('/dev/urandom', 'r');
  try {
    readSync(fd, bytes, 0, bytes.length, null);
  } finally {
    closeSync(fd);
  }
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
