import { spawn, type ChildProcess } from 'node:child_process';
import { forkWhenQuiet } from '../../util/fork-gate.js';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stdioWithoutLeaks } from '../host/fd-hygiene.js';
import { removeTree } from '../host/tree-removal.js';
import { withinReach } from '../../util/unix-socket-path.js';
import { GUEST_IMAGE_DISK, GUEST_VOLUMES_TAG } from './guest-disks.js';
import { IMAGE_ROOT_HELPER } from '../../images/image-root.js';
import { execFileWhenQuiet } from '../../util/fork-gate.js';
import { mountPointsUnder, unmountLazily } from '../host/tmpfs.js';
import type { IdRange } from '../../util/id-ranges.js';
import { GuestChannel } from './guest-channel.js';
import { GUEST_NETWORK, GUEST_PORT_NAME, type GuestImage } from './guest-image.js';

export const QEMU_PATH = '/usr/bin/qemu-system-x86_64';
const SETPRIV_PATH = '/usr/bin/setpriv';
/** Each connection of the guest to its proxy address is passed on by one of these (Debian's socat). */
export const SOCAT_PATH = '/usr/bin/socat';
/** In the VM's directory: where the host's egress proxy of the VM's job listens, if it has one. */
export const EGRESS_SOCKET = 'egress.sock';
const CHANNEL_SOCKET = 'channel.sock';
const MONITOR_SOCKET = 'monitor.sock';
/**
 * In the VM's directory: what it shares with its guest (a virtio-9p device, GUEST_VOLUMES_TAG),
 * empty until its job's volumes are bound into it (shareVolume). Every VM has the device, so
 * that a VM restored from the warm snapshot has it too; a guest that has not mounted it can be
 * saved (QEMU refuses to migrate a VM whose guest mounted a 9p share).
 */
const VOLUMES_DIR = 'volumes';
/**
 * The id a shared volume stores for the host's root: QEMU makes each file as itself, then gives
 * it to the guest's id (passthrough), and a mount idmapped for the guest's ids alone refuses a
 * maker it cannot map (EOVERFLOW). An id no sandbox has (above an image's 65,536), held by a
 * new file for that instant only.
 */
const QEMU_MAKES_AS = 4_000_000_000;

/** What a VM runs, as a VM saved whole must find it again (microvm-sandbox.ts resumeRefusal). */
export interface VmMade {
  /** The guest image's id. */
  image: string;
  memoryBytes: number;
  vcpus: number;
  /** The name of its image root disk (image-root-disk.ts), when its job runs on an image. */
  imageDisk?: string;
}

export interface VmShape {
  memoryBytes: number;
  vcpus: number;
  accel: 'kvm' | 'tcg';
}

/**
 * How the VM comes to life: a cold boot of the image, or a restore of a snapshot taken once
 * its guest was ready. A snapshot's RAM is a file (`memory`): the VM it was taken from wrote
 * its RAM there (shared), and each restored VM maps it copy-on-write, so a restore reads only
 * the device state and shares the snapshot's pages until it writes them.
 */
export type VmOrigin =
  /** `imageDisk`: the root disk of the job's image (image-root-disk.ts), a second drive. */
  | { boot: GuestImage; memoryFile?: string; imageDisk?: string }
  /** `imageDisk`: in place of the image slot the snapshot was taken with. */
  | { restore: { image: GuestImage; state: string; memoryFile: string; imageDisk?: string } }
  /** A VM saved whole (saveWhole: its RAM in the state file), brought back where it was: a paused sandbox's, with the image disk it had. */
  | { resume: { image: GuestImage; state: string; imageDisk?: string } };

/**
 * One QEMU `-M microvm` process (Firecracker's device model: virtio-mmio only, no PCI, no
 * firmware to speak of) and the channel to its VM agent over virtio-serial. Its one network
 * device reaches nothing but the host's egress proxy of its job, when that listens (networkArgs).
 * Killing the process is the end of everything the job did.
 */
export class QemuVm {
  private exited = false;
  readonly ended: Promise<void>;

  private constructor(
    private readonly process: ChildProcess,
    readonly dir: string,
    readonly channel: GuestChannel,
    /** What it runs, as a VM saved whole must find it again: the guest image's id, the VM's shape and its image disk's name. */
    readonly made: VmMade,
  ) {
    this.ended = new Promise((resolve) => {
      if (process.exitCode !== null || process.signalCode !== null) resolve();
      process.on('exit', () => resolve());
    });
    void this.ended.then(() => {
      this.exited = true;
      channel.fail(new Error('the VM exited'));
    });
  }

  get alive(): boolean {
    return !this.exited;
  }

  /**
   * Starts QEMU in `dir` (made here, removed by destroy) and returns once the VM agent answers.
   * An abort of `signal` before then kills QEMU, and the start fails (a probe or a snapshot's boot
   * of a backend being disposed of).
   */
  static async start(dir: string, origin: VmOrigin, shape: VmShape, readyTimeoutMs: number, signal?: AbortSignal): Promise<QemuVm> {
    signal?.throwIfAborted();
    await mkdir(dir, { recursive: true, mode: 0o700 });
    // A VM resumed whole runs its job at once, and never has volumes (its pause kept memory): sealed from the start.
    await makeShareRoot(join(dir, VOLUMES_DIR), 'resume' in origin);
    const socketPath = join(dir, CHANNEL_SOCKET);
    const consolePath = join(dir, 'console.log');
    const devNull = openSync('/dev/null', 'r');
    let child: ChildProcess;
    try {
      const stdio = stdioWithoutLeaks<'pipe'>(['ignore', 'ignore', 'pipe'], devNull);
      // Tied to this process by PDEATHSIG: a VM never outlives the service that started it.
      // Through the fork gate, as every fork beside staged jobs (fork-gate.ts: ETXTBSY otherwise).
      child = await forkWhenQuiet(() =>
        spawn(SETPRIV_PATH, ['--pdeathsig', 'KILL', '--', QEMU_PATH, ...qemuArgs(origin, shape, consolePath)], { env: {}, cwd: dir, stdio, detached: true }),
      );
    } finally {
      closeSync(devNull);
    }
    const stderr: Buffer[] = [];
    child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
    const died = new Promise<never>((_, reject) =>
      child.on('exit', (code, signal) => reject(new Error(`QEMU exited before the guest was ready (${signal ?? `exit ${code}`}): ${Buffer.concat(stderr).toString().trim()}`))),
    );
    died.catch(() => undefined);
    const kill = () => child.kill('SIGKILL');
    signal?.addEventListener('abort', kill, { once: true });
    try {
      const deadline = Date.now() + readyTimeoutMs;
      const incoming = 'restore' in origin ? { state: origin.restore.state, ignoreShared: 'on' } : 'resume' in origin ? { state: origin.resume.state, ignoreShared: 'off' } : null;
      let monitor: Monitor | null = null;
      if (incoming) {
        monitor = await Promise.race([Monitor.connect(join(dir, MONITOR_SOCKET), deadline), died]);
        await monitor.run(`migrate_set_capability x-ignore-shared ${incoming.ignoreShared}`);
        await monitor.run(`migrate_incoming "exec:cat ${plainPath(incoming.state)}"`);
        await monitor.untilMigration(deadline);
      }
      // Connected before a restored guest runs again: a guest writing to its port with no host
      // there gets ENODEV, and a resumed guest may have a job writing at once.
      const socket = await Promise.race([connectWhenListening(socketPath, deadline), died]);
      if (monitor) {
        // The snapshot was taken of a stopped VM, and the stopped state travels with it.
        await monitor.run('cont');
        monitor.close();
      }
      const disk = imageDiskOf(origin);
      const made = { image: imageOf(origin).id, memoryBytes: shape.memoryBytes, vcpus: shape.vcpus, ...(disk && { imageDisk: basename(disk) }) };
      const vm = new QemuVm(child, dir, new GuestChannel(socket), made);
      const answered = new AbortController();
      const timeout = sleep(Math.max(0, deadline - Date.now()), undefined, { signal: answered.signal }).then(() => {
        throw new Error(`the guest did not answer within ${readyTimeoutMs} ms`);
      });
      timeout.catch(() => undefined);
      await Promise.race([vm.channel.request({ op: 'ping' }), died, timeout]).finally(() => answered.abort());
      return vm;
    } catch (failure) {
      // QEMU's own words, when it exited, say more than the broken channel did.
      const exited = await Promise.race([died.catch((reason: Error) => reason), sleep(200).then(() => null)]);
      child.kill('SIGKILL');
      const console = await readFile(consolePath, 'utf8').catch(() => '');
      await unmountLazily(join(dir, VOLUMES_DIR)).catch(() => undefined);
      await removeTree(dir);
      const tail = console.trim().split('\n').slice(-8).join('\n');
      const message = (exited ?? (failure as Error)).message;
      throw new Error(`${message}${tail ? `\nguest console:\n${tail}` : ''}`, { cause: failure });
    } finally {
      signal?.removeEventListener('abort', kill);
    }
  }

  /**
   * Saves the VM (booted with a memory file) as a snapshot: its RAM is already in the memory
   * file, so the state file holds only the devices. The VM is gone afterwards.
   */
  async saveTo(stateFile: string): Promise<void> {
    const monitor = await this.monitor();
    await monitor.run('migrate_set_capability x-ignore-shared on');
    await monitor.run('stop');
    await monitor.run(`migrate "exec:cat > ${stateFile}"`);
    await monitor.untilMigration();
    await monitor.run('quit').catch(() => undefined);
    monitor.close();
    await this.ended;
  }

  /**
   * Saves the VM whole, its RAM in `stateFile` with the devices (a paused sandbox's: it comes
   * back as `resume`); the VM is gone afterwards. A VM that could not be saved runs on.
   */
  async saveWhole(stateFile: string, deadline: number): Promise<void> {
    const monitor = await this.monitor();
    try {
      await monitor.run('migrate_set_capability x-ignore-shared off');
      await monitor.run('stop');
      try {
        await monitor.runOrThrow(`migrate "exec:cat > ${plainPath(stateFile)}"`, 'to save the VM');
        await monitor.untilMigration(deadline);
      } catch (error) {
        // Not saved: it runs on as it was.
        await monitor.run('cont').catch(() => undefined);
        throw error;
      }
      await monitor.run('quit').catch(() => undefined);
    } finally {
      monitor.close();
    }
    await this.ended;
  }

  /**
   * Stops the guest's CPUs: a VM kept ready does nothing until it is taken (an idle guest under
   * emulation spent about 3.5% of a core on its timers, each VM, all the time). Its clocks stop
   * with it: to the guest no time passes.
   */
  async freeze(): Promise<void> {
    await this.monitorCommand('stop');
  }

  /** Runs a frozen guest again, where it was. */
  async thaw(): Promise<void> {
    await this.monitorCommand('cont');
  }

  private async monitorCommand(command: string): Promise<void> {
    const monitor = await this.monitor();
    try {
      await monitor.runOrThrow(command, command);
    } finally {
      monitor.close();
    }
  }

  /** The running VM's monitor (QEMU listens on it from its start). */
  private monitor(): Promise<Monitor> {
    return Monitor.connect(join(this.dir, MONITOR_SOCKET), Date.now() + 5000);
  }

  /**
   * Makes the `count` empty directories of the share that volumes are bound onto (shareVolume),
   * before the guest's job is prepared: its sandbox binds them in as it starts, and finds
   * through them what the host binds there after (QEMU walks the share's paths anew each time).
   */
  async makeVolumeShares(count: number): Promise<void> {
    for (let index = 0; index < count; index++) await mkdir(join(this.dir, VOLUMES_DIR, String(index)), { mode: 0o755 });
  }

  /**
   * Makes the share's root read-only, once its volumes are bound (or none is to be): from then on
   * QEMU, root on the host, writes nothing there but into the volumes bound in (and a guest
   * taken over by its job cannot fill the host's disk, nor plant a device or a setuid file).
   * Called before the guest's job starts.
   */
  async sealVolumeShares(): Promise<void> {
    if (process.getuid?.() === 0) await execFileWhenQuiet('/usr/bin/mount', ['-o', 'remount,ro', join(this.dir, VOLUMES_DIR)]);
  }

  /**
   * Binds a volume's file system (`source`, mounted on the host) where the guest finds it as
   * `<GUEST_VOLUMES_DIR>/<index>`, idmapped so that what the volume stores as 0 and 1000 (its
   * root's, its user's: volumes/volume-store.ts) is the job's root and user as the guest runs
   * them (`ids`, the job's user namespace map in the guest, as the guest said it). QEMU writes
   * the share as root, keeping the guest's ids (security_model=passthrough): through this mount
   * they are stored as the volume's own, as a local_process sandbox's are.
   */
  async shareVolume(index: number, source: string, readOnly: boolean, ids: readonly IdRange[]): Promise<void> {
    const target = join(this.dir, VOLUMES_DIR, String(index));
    const map = [...ids, { inside: QEMU_MAKES_AS, host: 0, count: 1 }].map(({ inside, host, count }) => `${inside}:${host}:${count}`).join(',');
    await execFileWhenQuiet(IMAGE_ROOT_HELPER, ['idmap', source, target, '--map', map, ...(readOnly ? ['--read-only'] : [])]);
  }

  /**
   * Kills the VM and removes its directory, its shared volumes unbound first: a volume's files
   * are never the VM's to remove. Should one stay mounted, removeTree refuses the directory, left
   * for the reaper (unmountOrphans) rather than walked.
   */
  async destroy(): Promise<void> {
    if (!this.exited) this.process.kill('SIGKILL');
    await this.ended;
    for (const mountPoint of await mountPointsUnder(this.dir)) await unmountLazily(mountPoint).catch(() => undefined);
    await removeTree(this.dir);
  }
}

/** QEMU's sockets are named relative to its working directory, the VM's dir, so that a dir of any depth serves (a unix socket's path has 107 bytes). */
function qemuArgs(origin: VmOrigin, shape: VmShape, consolePath: string): string[] {
  const image = imageOf(origin);
  return [
    '-M',
    'microvm,x-option-roms=off,rtc=off',
    '-accel',
    shape.accel,
    // rdrand feeds the guest's getrandom at once; python will not start without it.
    '-cpu',
    shape.accel === 'kvm' ? 'host' : 'qemu64,+rdrand',
    '-m',
    `${Math.floor(shape.memoryBytes / (1024 * 1024))}M`,
    '-smp',
    String(shape.vcpus),
    '-nodefaults',
    '-no-user-config',
    '-nographic',
    '-no-reboot',
    ...memoryArgs(origin, shape),
    '-kernel',
    image.kernel,
    '-initrd',
    image.initrd,
    '-append',
    (kernelCommandLine ??= guestKernelCommandLine()),
    '-drive',
    `id=root,file=${image.root},format=raw,if=none,readonly=on`,
    '-device',
    'virtio-blk-device,drive=root',
    ...imageDiskArgs(imageDiskOf(origin) ?? image.imageSlot),
    '-device',
    'virtio-rng-device',
    '-fsdev',
    // remap: volumes are file systems of their own under the share, whose inode numbers would clash (tar would take files for hard links).
    `local,id=volumes,path=${VOLUMES_DIR},security_model=passthrough,multidevs=remap`,
    '-device',
    `virtio-9p-device,fsdev=volumes,mount_tag=${GUEST_VOLUMES_TAG}`,
    ...networkArgs(EGRESS_SOCKET),
    // A restored VM gets a new generation id, and the guest kernel reseeds its random
    // generator on it: clones of one snapshot never share their randomness.
    '-device',
    'vmgenid,guid=auto',
    '-device',
    'virtio-serial-device',
    '-chardev',
    `socket,id=channel,path=${CHANNEL_SOCKET},server=on,wait=off`,
    '-device',
    `virtserialport,chardev=channel,name=${GUEST_PORT_NAME}`,
    '-monitor',
    `unix:${MONITOR_SOCKET},server=on,wait=off`,
    '-serial',
    `file:${consolePath}`,
    ...('boot' in origin ? [] : ['-incoming', 'defer']),
  ];
}

/**
 * The guest's link: QEMU's user-mode network with `restrict=on` (nothing the guest sends leaves
 * QEMU, and nothing of the host is forwarded in) but one `guestfwd`: each TCP connection to
 * GUEST_NETWORK.proxy runs socat, which passes it to `egressSocket`, where the host's egress proxy
 * of the VM's job listens (microvm-backend.ts) or nothing does (the connection is closed). Every
 * VM has it, whatever its job: a warm VM is restored before its job is known, and a snapshot
 * restores only into the device set it was taken with. A fixed MAC, as the snapshot saw it.
 */
function networkArgs(egressSocket: string): string[] {
  const { host, port } = GUEST_NETWORK.proxy;
  // QEMU splits its options at commas: the command and the path must hold none.
  const forward = `${SOCAT_PATH} - UNIX-CONNECT:${plainPath(egressSocket)}`;
  return ['-netdev', `user,id=egress,restrict=on,ipv6=off,guestfwd=tcp:${host}:${port}-cmd:${forward}`, '-device', 'virtio-net-device,netdev=egress,mac=52:54:00:12:34:56'];
}

/** The second drive, read-only, that the guest finds by its serial: the job's image disk, or the empty slot (GuestImage.imageSlot). */
function imageDiskArgs(disk: string): string[] {
  return ['-drive', `id=image,file=${plainPath(disk)},format=raw,if=none,readonly=on`, '-device', `virtio-blk-device,drive=image,serial=${GUEST_IMAGE_DISK}`];
}

function imageDiskOf(origin: VmOrigin): string | undefined {
  return 'boot' in origin ? origin.imageDisk : 'resume' in origin ? origin.resume.imageDisk : origin.restore.imageDisk;
}

/** The guest image a VM runs, whichever way it comes to life. */
function imageOf(origin: VmOrigin): GuestImage {
  return 'boot' in origin ? origin.boot : 'restore' in origin ? origin.restore.image : origin.resume.image;
}

/**
 * The guest's RAM is always the object `ram`, so a VM saved whole comes back into any VM of the
 * same shape: a file's (a snapshot's, shared while it is taken, copy-on-write when restored), or
 * anonymous memory.
 */
function memoryArgs(origin: VmOrigin, shape: VmShape): string[] {
  const file = 'restore' in origin ? origin.restore.memoryFile : 'boot' in origin ? origin.memoryFile : undefined;
  const size = `${Math.floor(shape.memoryBytes / (1024 * 1024))}M`;
  const backend =
    file === undefined ? `memory-backend-ram,id=ram,size=${size}` : `memory-backend-file,id=ram,size=${size},mem-path=${file},share=${'restore' in origin ? 'off' : 'on'}`;
  return ['-object', backend, '-machine', 'memory-backend=ram'];
}

/** QEMU's human monitor on a unix socket: one command at a time, its answer up to the next prompt. */
class Monitor {
  private buffered = '';
  private waiter: (() => void) | null = null;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffered += chunk.toString();
      this.waiter?.();
    });
  }

  static async connect(path: string, deadline: number): Promise<Monitor> {
    const monitor = new Monitor(await connectWhenListening(path, deadline));
    await monitor.prompt();
    return monitor;
  }

  async run(command: string): Promise<string> {
    this.buffered = '';
    this.socket.write(`${command}\n`);
    return this.prompt();
  }

  private async prompt(): Promise<string> {
    while (!this.buffered.endsWith('(qemu) ')) {
      if (this.socket.destroyed) throw new Error('the QEMU monitor closed');
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
        setTimeout(resolve, 200);
      });
    }
    const answer = this.buffered;
    this.buffered = '';
    return answer;
  }

  /** Runs `command`; an answer that reports an error is thrown, as "QEMU refused `what`: ...". */
  async runOrThrow(command: string, what: string): Promise<void> {
    const said = await this.run(command);
    if (/error/i.test(said)) throw new Error(`QEMU refused ${what}: ${said.replace('(qemu) ', '').trim()}`);
  }

  /** Waits for the migration under way (out or in) to complete, until `deadline` (then it is cancelled). */
  async untilMigration(deadline = Infinity): Promise<void> {
    for (;;) {
      const status = /Migration status: (\S+)/.exec(await this.run('info migrate'))?.[1];
      if (status === 'completed') return;
      if (status === 'failed' || status === 'cancelled') throw new Error(`the VM migration ${status}`);
      if (Date.now() > deadline) {
        await this.run('migrate_cancel');
        throw new Error(`the VM migration did not complete in time (${status ?? 'no status'})`);
      }
      await sleep(10);
    }
  }

  close(): void {
    this.socket.end();
  }
}

/** A path that goes into a shell command line (QEMU's `exec:` migration) as it is: a plain one only. */
function plainPath(path: string): string {
  if (!/^[\w./-]+$/.test(path)) throw new Error(`QEMU cannot be given ${JSON.stringify(path)}: only letters, digits, '.', '_', '-' and '/' go into its command`);
  return path;
}

/** The host's CPU rate does not change while we run: read once, for every VM. */
let kernelCommandLine: string | undefined;

/**
 * Under emulation the kernel's timer calibration can take seconds, or hang when the host is
 * busy; the host's TSC rate and loops-per-jiffy are given instead (Debian's kernels tick at
 * 250 Hz).
 */
function guestKernelCommandLine(): string {
  const mhz = Number(/^cpu MHz\s*:\s*([\d.]+)/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 2000);
  const khz = Math.round(mhz * 1000);
  const hz = 250;
  return ['console=ttyS0', 'quiet', 'panic=-1', 'random.trust_cpu=on', `tsc_early_khz=${khz}`, `lpj=${Math.round((khz * 1000) / hz)}`, 'no_timer_check'].join(' ');
}

async function connectWhenListening(path: string, deadline: number): Promise<Socket> {
  for (;;) {
    try {
      return await withinReach(
        path,
        (reachable) =>
          new Promise<Socket>((resolve, reject) => {
            const socket = connect(reachable);
            socket.once('connect', () => {
              socket.off('error', reject);
              resolve(socket);
            });
            socket.once('error', reject);
          }),
      );
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`QEMU did not open ${path}: ${(error as Error).message}`, { cause: error });
      await sleep(20);
    }
  }
}

/**
 * The root of a VM's share: a tmpfs of its own (as root), nosuid, nodev and noexec, a few KiB,
 * so that what QEMU writes there before it is sealed (sealVolumeShares) is bounded; anyone may
 * pass it, as the guest's jobs look up their volumes through it with their own ids.
 */
async function makeShareRoot(path: string, sealed: boolean): Promise<void> {
  await mkdir(path, { mode: 0o755 });
  const options = `size=64k,nr_inodes=256,mode=0755,nosuid,nodev,noexec${sealed ? ',ro' : ''}`;
  if (process.getuid?.() === 0) await execFileWhenQuiet('/usr/bin/mount', ['-t', 'tmpfs', '-o', options, 'agent-runner-share', path]);
}
