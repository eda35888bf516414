import { fileURLToPath } from 'node:url';
import { access, constants, mkdir, symlink } from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import type { BackendCapabilities } from '../../contract/backend.js';
import type { EgressHostOptions, ProxiedEgress } from '../../egress/policy.js';
import { CA_BUNDLE_SANDBOX_PATH, SANDBOX_UID } from '../bubblewrap/bwrap-argv.js';
import { egressMissing } from '../bubblewrap/host-probe.js';
import { HeldNetns } from '../host/held-netns.js';
import { DEFAULT_NETWORK_TOOLS, RESOLVER_FILES, type NetworkTools } from '../host/job-network.js';
import { CA_BUNDLE_FILE, ProxiedNetwork } from '../host/proxied-network.js';
import { execFileWhenQuiet } from '../../util/fork-gate.js';
import { detectCgroups, JobCgroup, reapStaleCgroups, type CgroupHost } from '../host/cgroups.js';
import { readHostLayout, type HostLayout } from '../host/host-layout.js';
import { HostWorkDir } from '../host/host-work-dir.js';
import { ownedName, reapDeadOwners } from '../host/owned-dirs.js';
import { isAlive } from '../host/process-tree.js';
import { baseEnvironment, probeTemplate } from '../profiles.js';
import { GvisorSandbox, writablePaths, type GvisorEgress, type Runsc } from './gvisor-sandbox.js';
import { replaceFile, writeIdentityFiles, writeLoopbackHosts, type IdentityFiles } from '../host/shared-files.js';
import { seccompSupported, writeFilterFile } from '../host/seccomp.js';
import type { OciPlan } from './oci-bundle.js';
import { findShellFiles } from '../shell-files.js';
import { unmountOrphans } from '../host/tmpfs.js';
import { removeTree } from '../host/tree-removal.js';
import type { WorkDirLease } from '../host/work-dir-pool.js';
import { HostDirJobs } from '../host-dir-jobs.js';
import { createStagedFile } from '../host/staged-files.js';
import { IMAGE_IDS, layersHoldPasswd, type ImageRootMount } from '../../images/image-root.js';
import { SandboxUnavailableError, type BackendStatus, type Mount, type PreparationProgress, type PreparedSandbox, type SandboxBackend, type SandboxTemplate } from '../types.js';

// Every host tool it runs forks through the gate (fork-gate.ts): it probes while jobs are staged.
const run = execFileWhenQuiet;

export interface GvisorOptions {
  runscPath?: string;
  /** Host directory for this backend's files: runsc's state, bundles, identity files. */
  runtimeDir: string;
  /** gVisor platform: ptrace works everywhere; kvm needs a usable /dev/kvm (not on this machine kind). */
  platform?: 'ptrace' | 'kvm' | 'systrap';
  tmpBytes?: number;
  /** The programs that give a job its namespace and relay (job-network.ts, held-netns.ts). */
  networkTools?: NetworkTools;
  /** How every job's egress proxy resolves names and which upstream roots it trusts (proxied-network.ts). */
  egress?: EgressHostOptions;
}

const DEFAULTS = { runscPath: '/usr/bin/runsc', platform: 'ptrace', tmpBytes: 256 * 1024 * 1024, networkTools: DEFAULT_NETWORK_TOOLS, egress: {} } as const;
/**
 * gVisor's own host threads (its Go runtime grows them under load; 26 were seen failing against a
 * budget of 72): on the ptrace platform every guest thread also runs in a host stub task.
 */
const SENTRY_TASKS = 256;

interface Ready {
  runsc: Runsc;
  version: string;
  layout: HostLayout;
  identityFiles: IdentityFiles;
  loopbackHosts: string;
  cgroups: CgroupHost;
  emptyFile: string;
  jobFilter: OciPlan['jobFilter'];
  shellFiles: readonly string[];
}

/**
 * The `gvisor` backend: each job is an OCI container run by runsc, so the job's system calls
 * are served by gVisor's user-space kernel, not the host's. The view and limits are those of
 * the bubblewrap profile; the work dir is a host directory bound in, so HostWorkDir serves the
 * job's files. Runs as root only (runsc creates the sandbox's namespaces and cgroups).
 */
export class GvisorBackend implements SandboxBackend {
  readonly kind = 'gvisor';
  readonly name = 'gvisor';
  readonly capabilities: BackendCapabilities = {
    network: ['none', 'proxy'],
    memory: ['cgroup', 'address-space'],
    snapshot: false,
    pause: 'memory',
    // runsc here takes no user namespace map, and its gofer would write root's files as the
    // host's root (in the nosuid work dir, but still): root's requests run as the user.
    root_inside: false,
    host_work_dir: true,
    volumes: 'bind',
    profiles: ['snippet', 'task', 'run-job'],
  };
  private readonly options: Required<GvisorOptions>;
  private readonly jobs: HostDirJobs;
  private ready: Promise<Ready> | undefined;

  constructor(options: GvisorOptions) {
    this.options = { ...DEFAULTS, ...options };
    this.jobs = new HostDirJobs(this.options.runtimeDir);
  }

  async status(): Promise<BackendStatus> {
    try {
      const ready = await this.whenReady();
      const notes = [
        `runsc ${ready.version}, platform ${this.options.platform}: the job's system calls are served by gVisor, not the host kernel`,
        `per-job cgroups (${ready.cgroups.version}) bound memory (the job's and gVisor's own), host tasks (the job's processes and threads plus ${SENTRY_TASKS} for gVisor) and CPU; RLIMIT_AS for python, bash, ruby, php, perl and lua`,
        egressMissing('proxy', this.options.networkTools) ??
          'network: jobs with allow_domains reach HTTP and TLS by name through an egress proxy on the host (runsc on the host stack of a namespace holding only the relay to it), nothing else; network "allow" is refused',
        'no Landlock in gVisor: exec rules are mounts: without allow_shell, shells are hidden and writable paths are noexec; with allowed_commands, every path is noexec but the allowed programs and their interpreters',
      ];
      return { kind: this.kind, name: this.name, available: true, notes, resourceControl: `cgroup-${ready.cgroups.version}` };
    } catch (error) {
      return { kind: this.kind, name: this.name, available: false, notes: [(error as Error).message], resourceControl: 'rlimits-only' };
    }
  }

  /** runsc's probe (a sandbox run) and what every bundle shares: the identity files, the host layout, an empty file. */
  prepareHost(progress: PreparationProgress): Promise<BackendStatus> {
    return progress.step('runsc probe', () => this.status());
  }

  async prepare(template: SandboxTemplate): Promise<PreparedSandbox> {
    return this.launch(template, await this.whenReady());
  }

  private async launch(template: SandboxTemplate, ready: Ready): Promise<GvisorSandbox> {
    const proxy = template.network === 'none' ? null : 'proxy' in template.network ? template.network.proxy : undefined;
    if (proxy === undefined) {
      throw new SandboxUnavailableError(
        'the gvisor backend gives jobs network by name only (policy.network {"allow_domains": [...]}): network "allow" is not supported on it (run the job on local_process)',
      );
    }
    // Never the host's network instead: without its tools a job asking for egress does not run.
    const noEgress = proxy && egressMissing('proxy', this.options.networkTools);
    if (noEgress) throw new SandboxUnavailableError(noEgress);
    const bundleDir = join(this.options.runtimeDir, 'jobs', ownedName());
    let lease: WorkDirLease | null = null;
    let cgroup: JobCgroup | null = null;
    let egress: GvisorEgress | null = null;
    try {
      const { limits } = template;
      const cgroupLimits = { memoryBytes: limits.memoryBytes, maxProcesses: limits.maxProcesses + SENTRY_TASKS, cpuCores: limits.cpuCores ?? null };
      // Ours, not runsc's: runsc leaves a group it did not make, so its OOM count is still there to read after the exit.
      cgroup = await JobCgroup.create(ready.cgroups, cgroupLimits, null);
      // The bundle is root's alone; its rootfs is the job's /, which the job must traverse.
      await mkdir(bundleDir, { mode: 0o700 });
      await mkdir(join(bundleDir, 'rootfs'), { mode: 0o755 });
      let imageRoot: ImageRootMount | null = null;
      if (template.image) {
        if (template.image.keepWritableIn) throw new SandboxUnavailableError('template builds run their steps on local_process');
        // The image's layers under a writable layer of its own, mounted by image-root around
        // runsc run (its gofer serves them): the image's ids as they are, gVisor's kernel maps none.
        const target = join(bundleDir, 'image');
        await mkdir(target, { mode: 0o755 });
        imageRoot = { target, layers: template.image.layers, writableBytes: template.image.writableBytes, ids: [{ inside: 0, host: 0, count: IMAGE_IDS }] };
      } else {
        for (const { path, target } of [...ready.layout.symlinks, ...ready.layout.ownLinks]) {
          await mkdir(dirname(join(bundleDir, 'rootfs', path)), { recursive: true, mode: 0o755 });
          await symlink(target, join(bundleDir, 'rootfs', path));
        }
      }
      const mounts: Mount[] = [...template.mounts];
      await this.jobs.handWritableMounts(template, SANDBOX_UID);
      let workDir: string | null = null;
      if (template.workDir !== undefined) {
        // gVisor's sandboxes are all the same host uid: a kept disk taken up needs no owner changed.
        lease = await this.jobs.leaseWorkDir(template, SANDBOX_UID, { ids: [{ inside: SANDBOX_UID, host: SANDBOX_UID, count: 1 }] });
        workDir = lease.path;
        mounts.push({ host: workDir, sandbox: template.workDir, writable: true });
      }
      const stagedFiles = new Map<string, string>();
      const stage = async (name: string, sandboxPath: string, mode: number) => {
        const host = join(bundleDir, `file-${stagedFiles.size}`);
        await createStagedFile(host, mode);
        stagedFiles.set(name, host);
        mounts.push({ host, sandbox: sandboxPath, writable: false });
      };
      for (const file of template.files) await stage(file.name, file.sandboxPath, file.executable ? 0o755 : 0o644);
      if (proxy) {
        // Filled by the proxied network when the job starts, as on local_process.
        await stage(RESOLVER_FILES.hosts, '/etc/hosts', 0o644);
        await stage(RESOLVER_FILES.resolvConf, '/etc/resolv.conf', 0o644);
        if (proxy.secrets.length > 0) await stage(CA_BUNDLE_FILE, CA_BUNDLE_SANDBOX_PATH, 0o644);
        egress = await attachEgress(proxy, this.options, join(bundleDir, 'egress.sock'));
      }
      const covered = (dir: string) => template.cwd === dir || template.cwd.startsWith(`${posix.normalize(dir)}/`);
      // runsc needs the cwd to exist; bwrap makes it (--dir), here it is scratch space of its own
      // (an image's cwd is its own).
      const scratch = imageRoot || template.cwd === '/tmp' || mounts.some((mount) => covered(mount.sandbox)) ? [] : [template.cwd];
      const plan = {
        layout: ready.layout,
        identityFiles: imageRoot && layersHoldPasswd(imageRoot.layers) ? null : ready.identityFiles[template.user ?? 'sandbox'],
        loopbackHosts: proxy ? null : ready.loopbackHosts,
        ...(imageRoot && { imageRoot: `${imageRoot.target}/merged` }),
        argv: template.argv,
        cwd: template.cwd,
        // The proxy's variables last: a job's own HTTPS_PROXY would lead nowhere.
        env: { ...baseEnvironment(template.profile), ...template.env, ...(proxy ? ProxiedNetwork.environment(proxy) : {}) },
        mounts,
        scratch,
        hidden: template.withoutShells ? ready.shellFiles : [],
        emptyFile: ready.emptyFile,
        jobFilter: ready.jobFilter,
        tmpBytes: this.options.tmpBytes,
        limits,
        cgroup: { path: cgroup.hierarchyPath, limits: cgroupLimits },
        netns: egress?.netns.path ?? null,
      };
      const release = lease?.release ?? null;
      return new GvisorSandbox({
        runsc: egress ? runscOnHostNetwork(ready.runsc) : ready.runsc,
        egress,
        id: posix.basename(bundleDir),
        jobDir: bundleDir,
        plan,
        guarded: template.guardExec === true,
        writablePaths: writablePaths(plan),
        stagedFiles,
        workDir,
        files: new HostWorkDir(workDir, template.workDir ?? null, SANDBOX_UID),
        releaseWorkDir: release,
        disk: lease?.disk ?? null,
        cgroup,
        imageRoot,
        onFinished: this.jobs.oweCleanup(),
        ...(template.restore && { restore: template.restore }),
      });
    } catch (error) {
      egress?.network.stop();
      egress?.netns.dispose();
      await cgroup?.dispose();
      await lease?.release();
      await removeTree(bundleDir);
      throw error;
    }
  }

  async dispose(): Promise<void> {
    await this.jobs.dispose();
  }

  /** Fails closed: if runsc cannot start a sandbox here, no job runs on it, and status says why. */
  private async probe(ready: Ready): Promise<void> {
    const template = probeTemplate(['/usr/bin/true']);
    const said: Buffer[] = [];
    const sink = { write: (chunk: Buffer) => void said.push(chunk) };
    const sandbox = await this.launch(template, ready);
    const outcome = await sandbox.start({ timeoutMs: 30_000, stdout: sink, stderr: sink }).finally(() => sandbox.release());
    if (outcome.exitCode !== 0) {
      const reason = Buffer.concat(said).toString('utf8').trim() || (outcome.timedOut ? 'it did not finish in 30 s' : `exit code ${outcome.exitCode ?? outcome.signal}`);
      throw new SandboxUnavailableError(`runsc cannot start a sandbox on this host (platform ${this.options.platform}): ${reason}`);
    }
  }

  private whenReady(): Promise<Ready> {
    // Whatever stops the host's set-up makes the kind unavailable, with the reason, for every face.
    this.ready ??= this.initialise().catch((error: Error) => {
      throw error instanceof SandboxUnavailableError ? error : new SandboxUnavailableError(`the gvisor backend cannot start here: ${error.message}`);
    });
    // A failed probe is retried next time: the admin may have installed runsc meanwhile.
    this.ready.catch(() => (this.ready = undefined));
    return this.ready;
  }

  private async initialise(): Promise<Ready> {
    const { runscPath, runtimeDir, platform } = this.options;
    try {
      await access(runscPath, constants.X_OK);
    } catch {
      throw new SandboxUnavailableError(`runsc (gVisor) is not installed at ${runscPath}: run scripts/setup-host.sh (or apt-get install runsc)`);
    }
    if (process.getuid?.() !== 0) {
      throw new SandboxUnavailableError('the gvisor backend needs root: runsc creates the sandbox namespaces and cgroups (rootless runsc cannot apply the limits)');
    }
    const { stdout } = await run(runscPath, ['--version'], { env: {} });
    const version = /runsc version (\S+)/.exec(stdout)?.[1] ?? stdout.trim();
    const stateDir = join(runtimeDir, 'runsc-state');
    await mkdir(join(runtimeDir, 'jobs'), { recursive: true, mode: 0o700 });
    await mkdir(stateDir, { recursive: true, mode: 0o700 });
    const cgroups = await detectCgroups();
    if (!cgroups) throw new SandboxUnavailableError('the gvisor backend needs a writable cgroup hierarchy with memory and pids controllers (none was found)');
    const runsc: Runsc = {
      path: runscPath,
      globalArgs: ['--root', stateDir, NO_NETWORK, `--platform=${platform}`, '--oci-seccomp'],
      checkpoint: checkpointFeatures(await run(runscPath, ['checkpoint', '--help'], { env: {} }).catch((error: { stdout?: string; stderr?: string }) => error)),
    };
    await reapOrphans(runsc, join(runtimeDir, 'jobs'), join(runtimeDir, 'workdirs'));
    await reapStaleCgroups(cgroups);
    const emptyFile = join(runtimeDir, 'empty');
    replaceFile(emptyFile, '');
    if (!seccompSupported()) throw new SandboxUnavailableError(`the syscall filter its jobs run under is written for x86_64; this host is ${process.arch}`);
    const jobFilter = { helper: SECCOMP_EXEC_HELPER, filter: writeFilterFile(runtimeDir) };
    const ready: Ready = {
      runsc,
      version,
      layout: readHostLayout(),
      identityFiles: writeIdentityFiles(runtimeDir),
      loopbackHosts: writeLoopbackHosts(runtimeDir),
      cgroups,
      emptyFile,
      jobFilter,
      shellFiles: findShellFiles(),
    };
    await this.probe(ready);
    return ready;
  }
}

const NO_NETWORK = '--network=none';

/**
 * What this runsc's `checkpoint` takes, from its help: `-compression` (2023 on) says both that an
 * image may be written uncompressed and that `-leave-running` leaves the sandbox running; the
 * 2022 runsc lists `-leave-running` too, but restarts the container from the image.
 */
export function checkpointFeatures(help: { stdout?: string; stderr?: string }): Runsc['checkpoint'] {
  const modern = /^\s*-compression\b/m.test(`${help.stdout ?? ''}${help.stderr ?? ''}`);
  return { leavesRunning: modern, uncompressed: modern };
}

/** The program a job in gVisor starts as, to put the sandbox's syscall filter on itself (native/seccomp-exec.c). */
const SECCOMP_EXEC_HELPER = fileURLToPath(new URL('../../../dist/native/seccomp-exec', import.meta.url));

/**
 * runsc for a job with egress by name: its network system calls are passed to the host's stack
 * in the namespace it joins (held-netns.ts: loopback only, where the relay to the job's proxy
 * listens), since gVisor's own stack (`--network=sandbox`) takes loopback for itself and this
 * runsc refuses it in any namespace on this kernel (its root-namespace test reads
 * /proc/sys/net/core/rmem_default, which every namespace has since Linux 6.x).
 */
function runscOnHostNetwork(runsc: Runsc): Runsc {
  return { ...runsc, globalArgs: runsc.globalArgs.map((arg) => (arg === NO_NETWORK ? '--network=host' : arg)) };
}

/** A job's namespace (held-netns.ts) with the relay to its egress proxy in it (proxied-network.ts). */
async function attachEgress(proxy: ProxiedEgress, options: Required<GvisorOptions>, socketPath: string): Promise<GvisorEgress> {
  const netns = await HeldNetns.create(options.networkTools);
  const network = new ProxiedNetwork(proxy, options.networkTools, socketPath, options.egress);
  network.attach(Promise.resolve(netns.info));
  return { netns, network };
}

/** Containers and bundles of agent-runner processes that died: their ids start with the owner's pid. */
async function reapOrphans(runsc: Runsc, jobsDir: string, workDirsDir: string): Promise<void> {
  const { stdout } = await run(runsc.path, [...runsc.globalArgs, 'list', '-quiet'], { env: {} }).catch(() => ({ stdout: '' }));
  for (const id of stdout.split('\n').filter(Boolean)) {
    const owner = Number(id.split('-')[0]);
    if (Number.isInteger(owner) && owner > 0 && !isAlive(owner)) await run(runsc.path, [...runsc.globalArgs, 'delete', '--force', id], { env: {} }).catch(() => undefined);
  }
  await unmountOrphans(workDirsDir, isAlive);
  await reapDeadOwners(jobsDir);
  await reapDeadOwners(workDirsDir);
}
