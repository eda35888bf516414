import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, lstat, mkdir, open, readdir, readFile, readlink, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SANDBOX_UID } from '../bubblewrap/bwrap-argv.js';
import { execFileWhenQuiet } from '../../util/fork-gate.js';
import { claimImage } from './image-cache.js';
import { SandboxUnavailableError } from '../types.js';

/**
 * Runs a host tool through the fork gate (fork-gate.ts: the image builds while jobs are staged);
 * an abort of `signal` (the backend disposed of) kills it and whatever it started.
 */
type Run = (file: string, args: readonly string[], options?: { maxBuffer?: number; input?: string }) => Promise<{ stdout: string; stderr: string }>;

function runner(signal: AbortSignal | undefined): Run {
  return (file, args, options = {}) => execFileWhenQuiet(file, args, { ...options, signal });
}

/**
 * What the guest is made of: Debian's stock kernel, a small initramfs (busybox and the virtio
 * modules the stock kernel keeps out of its image) and a read-only squashfs root built from the
 * host's own Debian files: the interpreters, a shell and core tools, the libraries they link,
 * and this package's VM agent. Compiled languages are compiled on the host; their programs
 * need only the C runtime the root holds.
 */
export interface GuestImage {
  kernel: string;
  initrd: string;
  root: string;
  /**
   * A sparse file of IMAGE_SLOT_BYTES that is every VM's second drive when its job has no image:
   * a snapshot restores only into the devices it was taken with, so the warm snapshot is taken
   * with it, and a VM for a job on an image is restored from that snapshot with the image's disk
   * in its place (the guest sees the slot's size, which no image disk is over).
   */
  imageSlot: string;
  /** Content hash of everything the image was built from. */
  id: string;
}

/** Packages whose files form the root (those missing on the host are left out). */
const ROOT_PACKAGES = [
  'libc6',
  'libgcc-s1',
  'libstdc++6',
  'busybox-static',
  'bubblewrap',
  'bash',
  'dash',
  'coreutils',
  'grep',
  'sed',
  'mawk',
  'findutils',
  'tar',
  'gzip',
  'python3.11-minimal',
  'libpython3.11-minimal',
  'libpython3.11-stdlib',
  'python3-minimal',
  'procps',
  'hostname',
  'diffutils',
];
/**
 * The python kernel of sessions and the code interpreter (IPython's InteractiveShell), taken
 * with what it depends on as installed; not what only a package manager or a debugger needs. numpy, pandas and matplotlib stay out: the
 * guest is for running code, and a cell that imports them is told they are not there.
 */
const KERNEL_PACKAGES = ['python3-ipython'];
const KERNEL_PACKAGES_LEFT_OUT = new Set(['gdb', 'dpkg', 'tzdata', 'python3']);
/** Single files of packages too large to take whole; mount and umount for the work dir's tmpfs. */
const ROOT_FILES = ['/usr/bin/node', '/usr/bin/prlimit', '/usr/bin/setpriv', '/usr/bin/mount', '/usr/bin/umount', '/usr/bin/python3'];
/** Dropped from the package lists: documentation, and python's own test suite. */
const LEFT_OUT = [/^\/usr\/share\/(doc|man|info|lintian|locale)\//, /^\/usr\/lib\/python3\.\d+\/test\//];
/**
 * Loaded by the initramfs, in order (the stock kernel builds virtio, squashfs and ext4 as
 * modules). ext4 is for an image's root disk (image-root-disk.ts), mounted by the VM agent;
 * it loads a crc32c driver at every mount, checksums or not. 9p is for volumes (the VM's share).
 */
const MODULES = [
  'virtio_ring',
  'virtio',
  'virtio_mmio',
  'virtio_blk',
  'virtio_console',
  'virtio_rng',
  'failover',
  'net_failover',
  'virtio_net',
  'squashfs',
  'overlay',
  'crc32c_generic',
  'crc16',
  'mbcache',
  'jbd2',
  'ext4',
  'netfs',
  'fscache',
  '9pnet',
  '9pnet_virtio',
  '9p',
];
/** Where this package sits inside the guest. */
export const GUEST_PACKAGE_DIR = '/opt/agent-runner';
/** The virtio-serial port the VM agent serves (its name in /sys/class/virtio-ports). */
export const GUEST_PORT_NAME = 'agent-runner';
/**
 * Bumped whenever what follows changes the image in a way its inputs do not show. 3: the guest's
 * network link (virtio_net, GUEST_NETWORK); a new image id also names new snapshots, taken
 * with the VM's network device (a snapshot restores only into the device set it was taken with).
 * 4: python's compiled modules. 5: ext4, for images' root disks. 6: the image slot, a second drive.
 * 7: 9p, and the VM's share of volumes (qemu-vm.ts shareVolume), a device of every VM.
 */
const BUILDER_VERSION = 7;
/** The image slot's size as the guest sees it: a bound on an image's root disk (image-root-disk.ts). */
export const IMAGE_SLOT_BYTES = 256 * 1024 ** 3;
/**
 * The guest's one network link, QEMU's user-mode network restricted to one forward (qemu-vm.ts):
 * the guest is `address`, and `proxy` is the only address that answers, forwarded to the host's
 * egress proxy of the VM's job. QEMU's defaults (10.0.2.0/24), fixed in every VM and snapshot.
 */
export const GUEST_NETWORK = { address: '10.0.2.15/24', proxy: { host: '10.0.2.100', port: 3128 } } as const;
const DPKG_STATUS = '/var/lib/dpkg/status';

const PACKAGE_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Where a host file of this package's dist is in the guest's root, or null if it is not one (packageFiles takes dist whole). */
export function guestPackagePath(hostPath: string): string | null {
  const dist = join(PACKAGE_ROOT, 'dist');
  const inside = relative(dist, hostPath);
  if (inside === '' || inside.startsWith('..') || isAbsolute(inside)) return null;
  return join(GUEST_PACKAGE_DIR, 'dist', inside);
}

/**
 * The image for this host, built once and cached by the hash of its inputs under `cacheDir`,
 * and claimed for this process until `release` (image-cache.ts: an image no process claims may
 * be removed once another is current). Rejects with SandboxUnavailableError naming what is missing,
 * or with `signal`'s reason once it is aborted: the tools it ran are killed by then, and the half
 * built image removed (it never had the image's name).
 */
export async function guestImage(cacheDir: string, signal?: AbortSignal): Promise<{ image: GuestImage; release(): Promise<void> }> {
  const kernel = await newestKernel();
  for (const tool of ['/usr/bin/mksquashfs', '/bin/busybox', '/usr/bin/cpio']) {
    if (!existsSync(tool)) throw new SandboxUnavailableError(`${tool} is missing: apt-get install squashfs-tools busybox-static cpio (scripts/setup-host.sh)`);
  }
  const id = await imageKey(kernel);
  const dir = join(cacheDir, id);
  const image = { kernel: kernel.path, initrd: join(dir, 'initrd.img'), root: join(dir, 'root.squashfs'), imageSlot: join(dir, 'image-slot.raw'), id };
  // Claimed before it is looked for: a pruner that moved it aside sees the claim and puts it back.
  // A cache this process may read but not write is used unclaimed (it cannot build either).
  const release = await claimImage(cacheDir, id).catch(() => async () => undefined);
  try {
    if (!existsSync(join(dir, 'complete'))) await buildImage(dir, kernel, await rootFiles(runner(signal), signal), runner(signal));
  } catch (error) {
    await release();
    throw error;
  }
  return { image, release };
}

/**
 * What names the image, cheap enough for every start (listing the root's files takes seconds):
 * the root changes only with the dpkg database (any install or upgrade, which rebuilds it
 * whatever it touched), the single files taken outside packages, this package's own files,
 * the kernel and this builder.
 */
async function imageKey(kernel: Kernel): Promise<string> {
  const hash = createHash('sha256').update(`builder ${BUILDER_VERSION}\nkernel ${kernel.release}\n`);
  for (const path of [DPKG_STATUS, ...ROOT_FILES]) {
    const info = await stat(path).catch(() => null);
    hash.update(`${path} ${info?.size} ${info?.mtimeMs}\n`);
  }
  for (const path of await packageFiles()) hash.update(`${path}\n`).update(await readFile(path));
  return hash.digest('hex').slice(0, 24);
}

interface Kernel {
  path: string;
  release: string;
}

async function newestKernel(): Promise<Kernel> {
  const names = await readdir('/boot').catch(() => []);
  const releases = names
    .filter((name) => name.startsWith('vmlinuz-'))
    .map((name) => name.slice('vmlinuz-'.length))
    .filter((release) => existsSync(join('/lib/modules', release, 'modules.dep')))
    .sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  const release = releases.at(-1);
  if (release === undefined)
    throw new SandboxUnavailableError('no guest kernel with its modules in /boot and /lib/modules: apt-get install linux-image-amd64 (scripts/setup-host.sh)');
  return { path: join('/boot', `vmlinuz-${release}`), release };
}

/** Every host path the root takes (files and links). */
async function rootFiles(run: Run, signal: AbortSignal | undefined): Promise<string[]> {
  const listed = new Set<string>();
  for (const name of [...ROOT_PACKAGES, ...(await installedClosure(KERNEL_PACKAGES, new Set([...ROOT_PACKAGES, ...KERNEL_PACKAGES_LEFT_OUT])))]) {
    // A tool that failed is taken as a package not installed: an abort is told apart here.
    signal?.throwIfAborted();
    const { stdout } = await run('dpkg', ['-L', name]).catch(() => ({ stdout: '' }));
    for (const path of stdout.split('\n')) if (path.startsWith('/') && !LEFT_OUT.some((pattern) => pattern.test(path))) listed.add(path);
  }
  for (const path of ROOT_FILES) if (existsSync(path)) listed.add(path);
  for (const path of await compiledModules(listed)) listed.add(path);
  const files = new Set<string>();
  for (const path of listed) {
    const info = await lstat(path).catch(() => null);
    if (info && (info.isFile() || info.isSymbolicLink())) files.add(usrPath(path));
  }
  for (const library of await linkedLibraries([...files], run, signal)) files.add(library);
  // Debian's alternatives (awk -> mawk) are links through /etc/alternatives, made by no package.
  for (const dir of ['/usr/bin', '/usr/sbin']) {
    for (const name of await readdir(dir)) {
      const alternative = await readlink(join(dir, name)).catch(() => '');
      if (!alternative.startsWith('/etc/alternatives/')) continue;
      const chosen = await readlink(alternative).catch(() => '');
      if (files.has(usrPath(chosen))) files.add(join(dir, name)).add(alternative);
    }
  }
  return [...files].sort();
}

/**
 * `seeds` and the installed packages they depend on, transitively, not following `known`. Only
 * the first of a dependency's alternatives is followed and `Provides` is not read: a dependency
 * met another way is left out (none is, for python3-ipython on Debian 12).
 */
async function installedClosure(seeds: readonly string[], known: ReadonlySet<string>): Promise<string[]> {
  const depends = new Map<string, string[]>();
  for (const stanza of (await readFile(DPKG_STATUS, 'utf8')).split('\n\n')) {
    const name = /^Package: (\S+)$/m.exec(stanza)?.[1];
    if (name === undefined || !/^Status: install ok installed$/m.test(stanza)) continue;
    const fields = [...stanza.matchAll(/^(?:Pre-)?Depends: (.+)$/gm)].map((match) => match[1]!);
    depends.set(
      name,
      fields.flatMap((field) => field.split(',').map((alternatives) => alternatives.split('|')[0]!.trim().split(/[\s:]/)[0]!)),
    );
  }
  const taken = new Set<string>();
  const pending = [...seeds];
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    if (taken.has(name) || known.has(name) || !depends.has(name)) continue;
    taken.add(name);
    pending.push(...depends.get(name)!);
  }
  return [...taken].sort();
}

/**
 * The host's compiled form of each python module listed (`__pycache__/<name>.cpython-3XX.pyc`,
 * written by the packages' install scripts, so in no package's list). The guest's root is
 * read-only: without them every python start there compiles each module it imports, every time,
 * which under emulation made a session's IPython take 54 s of CPU. tar keeps the sources'
 * mtimes, which the compiled files are checked against.
 */
async function compiledModules(listed: ReadonlySet<string>): Promise<string[]> {
  const byDir = new Map<string, Set<string>>();
  for (const path of listed) {
    if (!path.endsWith('.py')) continue;
    const dir = dirname(path);
    const names = byDir.get(dir) ?? new Set<string>();
    byDir.set(dir, names.add(basename(path, '.py')));
  }
  const compiled: string[] = [];
  for (const [dir, modules] of byDir) {
    const cache = join(dir, '__pycache__');
    for (const name of await readdir(cache).catch(() => [])) {
      const module = /^(.+)\.cpython-\d+\.pyc$/.exec(name)?.[1];
      if (module !== undefined && modules.has(module)) compiled.push(join(cache, name));
    }
  }
  return compiled;
}

/** The host merges /bin, /lib into /usr: the root holds each file once, at its /usr path. */
function usrPath(path: string): string {
  return /^\/(bin|sbin|lib|lib64)\//.test(path) ? `/usr${path}` : path;
}

/** The shared libraries the ELF files link, by the host's own dynamic linker. */
async function linkedLibraries(paths: readonly string[], run: Run, signal: AbortSignal | undefined): Promise<Set<string>> {
  const libraries = new Set<string>();
  const elves: string[] = [];
  for (const path of paths) {
    if (!/\/(bin|sbin)\/|\.so(\.|$)/.test(path)) continue;
    const info = await lstat(path);
    if (info.isFile() && (await readHead(path)).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]))) elves.push(path);
  }
  for (let start = 0; start < elves.length; start += 200) {
    signal?.throwIfAborted();
    const { stdout } = await run('ldd', elves.slice(start, start + 200), { maxBuffer: 64 * 1024 * 1024 }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
    for (const match of stdout.matchAll(/^\s+(?:\S+ => )?(\/\S+) \(0x/gm)) {
      const library = match[1]!;
      libraries.add(usrPath(library));
      // The library as found may be a link; its target is what gets loaded.
      const real = await readlink(library).catch(() => null);
      if (real !== null) libraries.add(usrPath(real.startsWith('/') ? real : join(dirname(library), real)));
    }
  }
  return libraries;
}

async function readHead(path: string): Promise<Buffer> {
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(4);
    await handle.read(buffer, 0, 4, 0);
    return buffer;
  } finally {
    await handle.close();
  }
}

/**
 * This package's files the guest runs: the compiled code, and the one dependency it loads. The
 * VM agent is tsc's modules (vm-agent.js and what it imports), never the bundle the host's
 * commands load (dist/bundle/, scripts/bundle-cli.mjs), which is left out.
 */
async function packageFiles(): Promise<string[]> {
  const dist = join(PACKAGE_ROOT, 'dist');
  if (!existsSync(join(dist, 'isolation', 'microvm', 'agent', 'vm-agent.js'))) throw new SandboxUnavailableError(`the VM agent is not built at ${dist}: run npm run build`);
  const out: string[] = [join(PACKAGE_ROOT, 'package.json')];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (path !== join(dist, 'bundle')) await walk(path);
      } else if (entry.isFile() && !entry.name.endsWith('.d.ts') && !entry.name.endsWith('.map')) out.push(path);
    }
  };
  await walk(dist);
  await walk(join(PACKAGE_ROOT, 'node_modules', 'picomatch'));
  return out.sort();
}

async function buildImage(dir: string, kernel: Kernel, files: readonly string[], run: Run): Promise<void> {
  // Built beside its final name and renamed into place whole: a concurrent builder of the
  // same image, or one that died half-way, never leaves a partial image under the name.
  const staging = `${dir}.building-${process.pid}`;
  await rm(staging, { recursive: true, force: true });
  const root = join(staging, 'root');
  try {
    await mkdir(root, { recursive: true });
    // tar keeps links as links and modes as they are; the list is read from stdin.
    await pipeTar(run, files, '/', root);
    await pipeTar(
      run,
      (await packageFiles()).map((path) => path.slice(PACKAGE_ROOT.length)),
      PACKAGE_ROOT,
      join(root, GUEST_PACKAGE_DIR.slice(1)),
    );
    await writeRootExtras(root, run);
    await run('/usr/bin/mksquashfs', [root, join(staging, 'root.squashfs'), '-noappend', '-all-root', '-noI', '-noD', '-noF', '-noX', '-quiet', '-no-progress']);
    await writeInitramfs(join(staging, 'initramfs'), kernel, join(staging, 'initrd.img'), run);
    await run('truncate', ['-s', String(IMAGE_SLOT_BYTES), join(staging, 'image-slot.raw')]);
    await rm(root, { recursive: true });
    await rm(join(staging, 'initramfs'), { recursive: true });
    await writeFile(join(staging, 'complete'), `${new Date().toISOString()}\n`);
    await mkdir(dirname(dir), { recursive: true });
    if (!existsSync(join(dir, 'complete'))) await rm(dir, { recursive: true, force: true });
    await rename(staging, dir).catch((error: NodeJS.ErrnoException) => {
      if (!existsSync(join(dir, 'complete'))) throw error;
    });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

async function pipeTar(run: Run, paths: readonly string[], from: string, to: string): Promise<void> {
  await mkdir(to, { recursive: true });
  const script = 'tar -C "$1" --no-recursion -cf - -T - | tar -C "$2" -xpf -';
  await run('/bin/sh', ['-c', script, 'sh', from, to], { maxBuffer: 16 * 1024 * 1024, input: paths.map((path) => (path.startsWith('/') ? path.slice(1) : path)).join('\n') });
}

async function writeRootExtras(root: string, run: Run): Promise<void> {
  for (const dir of ['proc', 'sys', 'dev', 'tmp', 'run', 'etc', 'mnt']) await mkdir(join(root, dir), { recursive: true });
  for (const [link, target] of [
    ['bin', 'usr/bin'],
    ['sbin', 'usr/sbin'],
    ['lib', 'usr/lib'],
    ['lib64', 'usr/lib64'],
  ] as const) {
    if (!existsSync(join(root, link))) await run('ln', ['-s', target, join(root, link)]);
  }
  await writeFile(
    join(root, 'etc/passwd'),
    `root:x:0:0:root:/root:/bin/sh\nsandbox:x:${SANDBOX_UID}:${SANDBOX_UID}:sandbox:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n`,
  );
  await writeFile(join(root, 'etc/group'), `root:x:0:\nsandbox:x:${SANDBOX_UID}:\nnogroup:x:65534:\n`);
  await writeFile(join(root, 'etc/hosts'), '127.0.0.1 localhost\n::1 localhost\n');
  const init = join(root, GUEST_PACKAGE_DIR.slice(1), 'guest-init');
  // The root is read-only; an overlay on a tmpfs gives the job's paths somewhere to be made.
  await writeFile(
    init,
    [
      '#!/usr/bin/busybox sh',
      // The root has busybox but none of its applet links: each is named through it.
      'b=/usr/bin/busybox',
      '$b mount -t proc proc /proc',
      '$b mount -t sysfs sys /sys',
      '$b mount -t cgroup2 cgroup2 /sys/fs/cgroup',
      '$b hostname sandbox',
      '$b mount -t devtmpfs dev /dev',
      '$b mkdir -p /dev/shm',
      '$b mount -t tmpfs -o mode=1777,nosuid,nodev tmp /tmp',
      '$b mount -t tmpfs -o mode=1777,nosuid,nodev shm /dev/shm',
      '$b mount -t tmpfs -o mode=755 run /run',
      '$b ip link set lo up',
      `$b ip address add ${GUEST_NETWORK.address} dev eth0 && $b ip link set eth0 up`,
      'for port in /sys/class/virtio-ports/*; do',
      `  if [ "$($b cat "$port/name")" = "${GUEST_PORT_NAME}" ]; then channel=/dev/\${port##*/}; fi`,
      'done',
      `exec /usr/bin/node ${GUEST_PACKAGE_DIR}/dist/isolation/microvm/agent/vm-agent.js "$channel"`,
      '',
    ].join('\n'),
  );
  await chmod(init, 0o755);
}

async function writeInitramfs(dir: string, kernel: Kernel, output: string, run: Run): Promise<void> {
  await mkdir(join(dir, 'bin'), { recursive: true });
  await mkdir(join(dir, 'modules'));
  for (const name of ['dev', 'proc', 'sys', 'lower', 'upper', 'root']) await mkdir(join(dir, name));
  await run('cp', ['/bin/busybox', join(dir, 'bin/busybox')]);
  const loaded: string[] = [];
  for (const name of MODULES) {
    const { stdout } = await run('modinfo', ['-k', kernel.release, '-F', 'filename', name]).catch(() => ({ stdout: '' }));
    const path = stdout.trim();
    if (path === '' || path === '(builtin)') continue;
    await run('cp', [path, join(dir, 'modules', `${name}.ko${path.endsWith('.xz') ? '.xz' : ''}`)]);
    loaded.push(`${name}.ko${path.endsWith('.xz') ? '.xz' : ''}`);
  }
  const init = join(dir, 'init');
  await writeFile(
    init,
    [
      '#!/bin/busybox sh',
      'export PATH=/bin',
      '/bin/busybox --install -s /bin',
      'mount -t proc proc /proc',
      'mount -t devtmpfs dev /dev',
      ...loaded.map((module) => `insmod /modules/${module}`),
      'mount -t squashfs -o ro /dev/vda /lower || { echo "guest: cannot mount the root image"; poweroff -f; }',
      'mount -t tmpfs -o mode=755 upper /upper',
      'mkdir -p /upper/data /upper/work',
      'mount -t overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work root /root',
      'umount /proc /dev',
      `exec switch_root /root ${GUEST_PACKAGE_DIR}/guest-init`,
      '',
    ].join('\n'),
  );
  await chmod(init, 0o755);
  await run('/bin/sh', ['-c', 'cd "$1" && find . | cpio -o -H newc --quiet | gzip -1 > "$2"', 'sh', dir, output]);
}
