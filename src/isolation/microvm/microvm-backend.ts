import { guestSeed } from './guest-channel.js';
import { access, constants, mkdir, mkdtemp, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { BackendCapabilities } from '../../contract/backend.js';
import type { EgressHostOptions } from '../../egress/policy.js';
import { ownedName, reapDeadOwners } from '../host/owned-dirs.js';
import { unmountOrphans } from '../host/tmpfs.js';
import { isAlive } from '../host/process-tree.js';
import { removeTree } from '../host/tree-removal.js';
import { writeFileAtomic } from '../../util/atomic-write.js';
import {
  SandboxUnavailableError,
  UNWATCHED,
  type BackendStatus,
  type PreparationProgress,
  type PreparedSandbox,
  type SandboxBackend,
  type SandboxTemplate,
  type WarmTakes,
} from '../types.js';
import { pruneImages } from './image-cache.js';
import { GUEST_NETWORK, guestImage, guestPackagePath, IMAGE_SLOT_BYTES, type GuestImage } from './guest-image.js';
import { imageRootDisk } from './image-root-disk.js';
import { CA_BUNDLE_SANDBOX_PATH } from '../bubblewrap/bwrap-argv.js';
import { CA_BUNDLE_FILE, ProxiedNetwork, startEgressProxy } from '../host/proxied-network.js';
import { MicrovmSandbox, resumeRefusal, VM_STATE_FILE } from './microvm-sandbox.js';
import { EGRESS_SOCKET, QEMU_PATH, QemuVm, SOCAT_PATH, type VmShape } from './qemu-vm.js';
import { warmSnapshot, WarmVmPool, type WarmVmPoolOptions } from './warm-vm-pool.js';

export interface MicrovmOptions {
  /** Host directory for this backend's VMs and images. */
  runtimeDir: string;
  memoryBytes?: number;
  vcpus?: number;
  /** Restored VMs kept ready (0: every job boots its own VM cold). */
  warmPoolSize?: number;
  /** How long a cold boot may take before the VM agent answers. */
  bootTimeoutMs?: number;
  /** Guest images, snapshots and accelerator probes, by content hash (null: runtimeDir/cache). */
  cacheDir?: string | null;
  /** How every job's egress proxy resolves names and which upstream roots it trusts (proxied-network.ts). */
  egress?: EgressHostOptions;
}

const DEFAULTS = { memoryBytes: 1024 * 1024 * 1024, vcpus: 1, warmPoolSize: 2, bootTimeoutMs: 60_000, cacheDir: null, egress: {} } as const;

interface Ready {
  image: GuestImage;
  /** Where images' root disks are kept (image-root-disk.ts). */
  imageRootsDir: string;
  shape: VmShape;
  /** Made on the first job (its snapshot is taken then, once per image, unless prepareHost took it): status stays cheap. */
  pool: () => Promise<WarmVmPool | null>;
  /** What the pool's snapshot is taken with. */
  snapshot: Omit<WarmVmPoolOptions, 'size' | 'takes'>;
  /** The pool if a job made one, never making it: disposing of an idle backend boots no VM. */
  madePool: () => Promise<WarmVmPool | null> | undefined;
  /** Which accelerator, and why not KVM when not. */
  accelNote: string;
  /** Ends this process's claim on the image. */
  releaseImage(): Promise<void>;
  /** The removal of images no process uses any more, started once the image is ready. */
  pruned: Promise<unknown>;
}

/** A KVM boot of this small guest takes well under a second; one that has not answered by now will not. */
const KVM_PROBE_TIMEOUT_MS = 15_000;

/**
 * The `microvm` backend (alias `firecracker`): each job gets a VM of its own, QEMU's
 * `-M microvm` machine booting Debian's stock kernel on a read-only root built from the host's
 * files (guest-image.ts), and never reused. The VM agent inside (agent/vm-agent.ts) makes
 * the job's sandbox with the same bubblewrap backend the host uses and performs the prepared
 * sandbox's operations for the host over the VM's channel; the guest kernel is one more
 * boundary. VMs come warm from a snapshot taken once a booted guest was ready (warm-vm-pool.ts).
 */
export class MicrovmBackend implements SandboxBackend {
  readonly kind = 'microvm';
  readonly name = 'qemu-microvm';
  readonly warmTakes: WarmTakes = { hit: 0, miss: 0 };
  readonly capabilities: BackendCapabilities = {
    network: ['none', 'proxy'],
    memory: ['vm', 'address-space'],
    snapshot: true,
    pause: 'memory',
    // The guest's bubblewrap gives it, the guest's agent being the guest's root.
    root_inside: true,
    host_work_dir: false,
    volumes: 'share',
    profiles: ['snippet', 'task', 'run-job'],
  };
  private readonly options: Required<MicrovmOptions>;
  private ready: Promise<Ready> | undefined;
  private readonly live = new Set<Promise<void>>();
  /** Set by dispose(): a preparation still running stops before its next slow step (the KVM probe boot). */
  private disposed = false;
  /** Aborted by dispose(): the host tools and VMs a preparation started are killed (guest-image.ts, qemu-vm.ts). */
  private readonly stopping = new AbortController();

  constructor(options: MicrovmOptions) {
    this.options = { ...DEFAULTS, ...options };
  }

  async status(): Promise<BackendStatus> {
    try {
      const ready = await this.whenReady();
      const notes = [
        `QEMU -M microvm under ${ready.accelNote}; guest kernel ${ready.image.kernel}, root image ${ready.image.id}`,
        `one VM per job, never reused: ${Math.round(ready.shape.memoryBytes / (1024 * 1024))} MiB, ${ready.shape.vcpus} vCPU; inside it the job runs in the same bubblewrap sandbox as on local_process (namespaces, seccomp, Landlock exec rules, the guest's cgroup v2 and rlimits)`,
        this.options.warmPoolSize > 0 ? `warm: ${this.options.warmPoolSize} VMs restored from a snapshot kept ready` : 'cold: every job boots its VM',
        "network: one device, QEMU's user-mode network restricted to a forward to the host's egress proxy of the VM's job: jobs with allow_domains reach HTTP and TLS by name through it, nothing else; network \"allow\" is refused",
        'compiled languages are compiled on the host (bubblewrap) and run in the VM',
      ];
      return { kind: this.kind, name: this.name, available: true, notes, resourceControl: 'cgroup-v2' };
    } catch (error) {
      return { kind: this.kind, name: this.name, available: false, notes: [(error as Error).message], resourceControl: 'rlimits-only' };
    }
  }

  /** The guest image, the accelerator probe and, with a warm pool, its snapshot for the configured VM shape. */
  async prepareHost(progress: PreparationProgress): Promise<BackendStatus> {
    try {
      const ready = await this.whenReady(progress);
      if (this.options.warmPoolSize > 0) await progress.step('warm snapshot', () => warmSnapshot(ready.snapshot));
    } catch (error) {
      if (!(error instanceof SandboxUnavailableError)) {
        return {
          kind: this.kind,
          name: this.name,
          available: false,
          notes: [`the warm snapshot could not be taken: ${(error as Error).message}`],
          resourceControl: 'rlimits-only',
        };
      }
      // The status says why, as it would to a job.
    }
    return this.status();
  }

  async prepare(template: SandboxTemplate): Promise<PreparedSandbox> {
    const ready = await this.whenReady();
    if (template.image?.keepWritableIn) throw new SandboxUnavailableError('template builds run their steps on local_process');
    const proxy = template.network === 'none' ? null : 'proxy' in template.network ? template.network.proxy : undefined;
    if (proxy === undefined) {
      throw new SandboxUnavailableError(
        'the microvm backend gives jobs network by name only (policy.network {"allow_domains": [...]}): network "allow" is not supported on it (run the job on local_process)',
      );
    }
    if (
      proxy &&
      !(await access(SOCAT_PATH, constants.X_OK).then(
        () => true,
        () => false,
      ))
    )
      throw new SandboxUnavailableError(`jobs with allow_domains cannot run here: ${SOCAT_PATH} is missing (apt-get install socat)`);
    const mounts = template.mounts.map((mount) => {
      // This package's own files are in the guest's root too, where it has them.
      const inGuest = mount.writable ? null : guestPackagePath(mount.host);
      if (inGuest === null) {
        throw new SandboxUnavailableError(
          `the microvm backend cannot bind host directories into the VM (${mount.host} at ${mount.sandbox}): the guest has only its own root image`,
        );
      }
      return { host: inGuest, sandbox: mount.sandbox, writable: false as const };
    });
    // An image's layers reach the VM as one disk made of them, kept for the next VM.
    const imageDisk = template.image && (await imageRootDisk(ready.imageRootsDir, template.image.layers, IMAGE_SLOT_BYTES, this.stopping.signal));
    const { restore } = template;
    if (restore) {
      const now = { image: ready.image.id, memoryBytes: ready.shape.memoryBytes, vcpus: ready.shape.vcpus, ...(imageDisk && { imageDisk: basename(imageDisk) }) };
      const refusal = await resumeRefusal(restore.image, now);
      if (refusal) throw new SandboxUnavailableError(`the paused microVM cannot resume here: ${refusal}`);
    }
    const scratchDir = await mkdtemp(join(this.options.runtimeDir, 'jobs', `${ownedName()}-`));
    const disk = imageDisk ? { imageDisk } : {};
    // A paused sandbox's VM comes back whole, its job running in it (its files are in its memory).
    // One on an image is restored from the warm snapshot with the image's disk in its slot: the
    // pool's VMs were restored with the empty slot.
    const made = restore
      ? QemuVm.start(this.newVmDir(), { resume: { image: ready.image, state: join(restore.image, VM_STATE_FILE), ...disk } }, ready.shape, this.options.bootTimeoutMs)
      : this.vm(ready, imageDisk);
    const vm = await made.catch(async (error: Error) => {
      await removeTree(scratchDir);
      throw new SandboxUnavailableError(`no microVM could be started: ${error.message}`);
    });
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    this.live.add(done);
    const sandbox = new MicrovmSandbox(
      vm,
      template,
      scratchDir,
      () => {
        this.live.delete(done);
        finished();
      },
      restore !== undefined,
    );
    if (restore) return sandbox;
    const volumes = template.volumes ?? [];
    try {
      const files = template.files.map((file) => ({ ...file }));
      let env = template.env;
      if (proxy) {
        // The proxy's variables last, as on local_process; its address is the guest's forward to it.
        env = { ...env, ...ProxiedNetwork.environment(proxy, `${GUEST_NETWORK.proxy.host}:${GUEST_NETWORK.proxy.port}`) };
        if (proxy.secrets.length > 0) files.push({ name: CA_BUNDLE_FILE, sandboxPath: CA_BUNDLE_SANDBOX_PATH, executable: false });
      }
      // The guest's system is read-only: no sudo is bound there (nor would the host's path of it reach the guest).
      const { sudo: _hostSudo, ...forGuest } = template;
      const guestTemplate = {
        ...forGuest,
        argv: [...template.argv],
        env,
        files,
        limits: { ...template.limits },
        mounts,
        ...(template.image && { image: { writableBytes: template.image.writableBytes } }),
        // The guest's kernel (6.1) idmaps no tmpfs, where its system's root layer would be: the
        // system stays read-only in a VM.
        writableRoot: false,
        network: 'none' as const,
        ...(proxy && { vmNetwork: true }),
        volumes: volumes.map(({ sandbox, writable }) => ({ sandbox, writable })),
      };
      await vm.makeVolumeShares(volumes.length);
      const prepared = await vm.channel.request({ op: 'prepare', template: guestTemplate, now: Date.now(), entropy: guestSeed() });
      if (volumes.length > 0) {
        // Bound through the ids the guest runs the job as, which it says: a guest that lied maps
        // only its own job's files wrongly (the bind is nosuid and nodev, within the volume).
        if (!prepared.ids) throw new SandboxUnavailableError("the VM's guest did not say its job's ids: its volumes cannot be shared");
        for (const [index, volume] of volumes.entries()) await vm.shareVolume(index, volume.host, !volume.writable, prepared.ids);
      }
      await vm.sealVolumeShares();
      if (proxy) {
        // Listening where the VM's forward leads (qemu-vm.ts) until the VM is gone.
        const listening = await startEgressProxy(proxy, join(vm.dir, EGRESS_SOCKET), this.options.egress, (name, content) => sandbox.writeFile(name, content));
        void vm.ended.then(() => listening.close());
      }
    } catch (error) {
      sandbox.discard();
      throw error;
    }
    return sandbox;
  }

  private async vm(ready: Ready, imageDisk: string | undefined): Promise<QemuVm> {
    const pool = await ready.pool();
    if (pool) return imageDisk ? pool.restore(imageDisk) : pool.take();
    return QemuVm.start(this.newVmDir(), { boot: ready.image, ...(imageDisk && { imageDisk }) }, ready.shape, this.options.bootTimeoutMs);
  }

  /** A directory of a VM of this process's own, under the runtime dir's `vms/`, where a dead process's are reaped. */
  private newVmDir(): string {
    return join(this.options.runtimeDir, 'vms', ownedName());
  }

  /** Resolves once the warm pool is full (for a service that wants its first job warm, and benchmarks). */
  async warmUp(): Promise<void> {
    await (await (await this.whenReady()).pool())?.waitReady();
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.stopping.abort(new SandboxUnavailableError('the microvm backend was disposed of while it was being prepared'));
    const ready = await this.ready?.catch(() => null);
    await (await ready?.madePool()?.catch(() => null))?.dispose();
    await Promise.all(this.live);
    await Promise.all([ready?.releaseImage(), ready?.pruned]);
  }

  private whenReady(progress: PreparationProgress = UNWATCHED): Promise<Ready> {
    // Its claim on the image went with the dispose.
    if (this.disposed) return Promise.reject(new SandboxUnavailableError('the microvm backend was disposed of'));
    this.ready ??= this.initialise(progress).catch((error: Error) => {
      throw error instanceof SandboxUnavailableError ? error : new SandboxUnavailableError(`the microvm backend cannot start here: ${error.message}`);
    });
    // A failed set-up is tried again next time: the admin may have installed what was missing.
    this.ready.catch(() => (this.ready = undefined));
    return this.ready;
  }

  private async initialise(progress: PreparationProgress): Promise<Ready> {
    try {
      await access(QEMU_PATH, constants.X_OK);
    } catch {
      throw new SandboxUnavailableError(`QEMU is not installed at ${QEMU_PATH}: run scripts/setup-host.sh (or apt-get install qemu-system-x86)`);
    }
    const { runtimeDir } = this.options;
    const cacheDir = this.options.cacheDir ?? join(runtimeDir, 'cache');
    // Made one level at a time: a recursive mkdir would give the parents (the state dir's
    // runtime/, which jobs of other backends traverse) the private mode too.
    await mkdir(runtimeDir, { recursive: true, mode: 0o755 });
    for (const dir of [join(runtimeDir, 'jobs'), join(runtimeDir, 'vms')]) await mkdir(dir, { recursive: true, mode: 0o700 });
    await mkdir(cacheDir, { recursive: true, mode: 0o755 });
    await reapDeadOwners(join(runtimeDir, 'jobs'));
    // A dead process's VMs may have left their volumes bound in (qemu-vm.ts shareVolume): unbound before their dirs go.
    await unmountOrphans(join(runtimeDir, 'vms'), isAlive);
    await reapDeadOwners(join(runtimeDir, 'vms'));
    const { signal } = this.stopping;
    const { image, release: releaseImage } = await progress.step('guest image', () => guestImage(join(cacheDir, 'images'), signal));
    // Old images and their snapshots (about 0.4 GB each) go in the background.
    const pruned = pruneImages(cacheDir, image.id).catch(() => undefined);
    let accel: Awaited<ReturnType<MicrovmBackend['chooseAccel']>>;
    try {
      signal.throwIfAborted();
      accel = await progress.step('accelerator probe', () => this.chooseAccel(image, cacheDir));
    } catch (error) {
      await Promise.all([releaseImage(), pruned]);
      throw error;
    }
    const shape: VmShape = { memoryBytes: this.options.memoryBytes, vcpus: this.options.vcpus, accel: accel.accel };
    const { warmPoolSize, bootTimeoutMs } = this.options;
    const snapshot = { image, shape, snapshotsDir: join(cacheDir, 'snapshots'), vmsDir: join(runtimeDir, 'vms'), bootTimeoutMs, signal };
    let pool: Promise<WarmVmPool | null> | undefined;
    const makePool = () => (warmPoolSize > 0 ? WarmVmPool.create({ ...snapshot, size: warmPoolSize, takes: this.warmTakes }) : Promise.resolve(null));
    return {
      image,
      imageRootsDir: join(cacheDir, 'image-roots'),
      shape,
      snapshot,
      accelNote: accel.note,
      releaseImage,
      pruned,
      pool: () => {
        pool ??= makePool();
        // A snapshot that could not be taken is tried again by the next job.
        pool.catch(() => (pool = undefined));
        return pool;
      },
      madePool: () => pool,
    };
  }

  /**
   * KVM where it boots this guest, otherwise TCG (software emulation). A /dev/kvm may exist
   * and still not run the guest (a nested or paravirtual hypervisor), so the answer is a real
   * boot, tried once per image and remembered beside it.
   */
  private async chooseAccel(image: GuestImage, cacheDir: string): Promise<{ accel: VmShape['accel']; note: string }> {
    const remembered = join(cacheDir, 'images', `${image.id}.accel.json`);
    // Written whole or not at all (writeFileAtomic); anything else found there is probed again.
    const known = await readFile(remembered, 'utf8')
      .then((text) => JSON.parse(text) as { accel: VmShape['accel']; note: string })
      .catch(() => null);
    if (known) return known;
    const { signal } = this.stopping;
    let choice: { accel: VmShape['accel']; note: string };
    try {
      await access('/dev/kvm', constants.R_OK | constants.W_OK);
      const shape: VmShape = { memoryBytes: this.options.memoryBytes, vcpus: this.options.vcpus, accel: 'kvm' };
      const vm = await QemuVm.start(this.newVmDir(), { boot: image }, shape, KVM_PROBE_TIMEOUT_MS, signal);
      await vm.destroy();
      choice = { accel: 'kvm', note: 'KVM' };
    } catch (error) {
      // A probe killed by the dispose says nothing of KVM: nothing is remembered.
      signal.throwIfAborted();
      const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no /dev/kvm' : `KVM did not boot the guest: ${(error as Error).message.split('\n')[0]}`;
      choice = { accel: 'tcg', note: `TCG (software emulation; ${reason})` };
    }
    await writeFileAtomic(remembered, JSON.stringify(choice), { mode: 0o644 });
    return choice;
  }
}
