import { posix } from 'node:path';
import type { HostLayout } from '../host/host-layout.js';
import type { Mount } from '../types.js';
import { viewLayers, type WorkspacePlan } from './workspace-profile.js';

/** The uid/gid the job sees inside its user namespace; the host side is an unprivileged uid. */
export const SANDBOX_UID = 1000;
export const SANDBOX_GID = 1000;
export const SANDBOX_HOSTNAME = 'sandbox';
/**
 * What root inside a sandbox made with `rootInside` holds, in its own user namespace: acting as the
 * user (setuid, setgid), and root's powers over files and processes, which the kernel grants only
 * toward the uids mapped there (the sandbox's two) and never over host files, owned by unmapped uids.
 * No CAP_SYS_ADMIN, CAP_NET_*, CAP_MKNOD or CAP_SYS_PTRACE: no mount, no device, no new kernel surface.
 */
export const ROOT_INSIDE_CAPABILITIES = ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID'] as const;

const DEVICES = ['/dev/null', '/dev/zero', '/dev/full', '/dev/random', '/dev/urandom'];
const DEV_LINKS = [
  ['/dev/fd', '/proc/self/fd'],
  ['/dev/stdin', '/proc/self/fd/0'],
  ['/dev/stdout', '/proc/self/fd/1'],
  ['/dev/stderr', '/proc/self/fd/2'],
] as const;
const DEV_TMPFS_BYTES = 64 * 1024;

/** The job's resolver files when it has egress; with secrets, the CA bundle it trusts (proxied-network.ts). */
export interface NetworkFiles {
  hosts: string;
  resolvConf: string;
  caBundle?: string;
}

/** Where a job with secrets finds its CA bundle: the system's roots and its own job CA. */
export const CA_BUNDLE_SANDBOX_PATH = '/etc/agent-runner-ca-bundle.pem';

const BOOT_ID_PATH = '/proc/sys/kernel/random/boot_id';

/** Where a template's sudo is bound: first in Debian's PATH and in sudo's own secure_path. */
const SUDO_PATH = '/usr/local/bin/sudo';

export interface BwrapPlan {
  layout: HostLayout;
  /**
   * passwd/group files naming the sandbox user, so tools that look it up do not fail; null: the
   * image's own (an image root with an /etc/passwd, which its builds and tools may change).
   */
  identityFiles: { passwd: string; group: string } | null;
  /** A /proc/meminfo that reports the job's memory limit, so `free` and runtimes size themselves to it. */
  meminfo: string;
  /**
   * The sandbox's own /proc/sys/kernel/random/boot_id (a file of a fresh UUID): a start of a
   * sandbox is a boot to what runs in it (a sandbox paused with its files only and resumed is told
   * apart from one that kept its memory), and the host's boot id, the same for every sandbox and
   * known outside, is no one's to read.
   */
  bootId: string;
  argv: readonly string[];
  cwd: string;
  env: Readonly<Record<string, string>>;
  mounts: readonly Mount[];
  /** Volumes (a microVM's guest: SandboxTemplate.volumes), bound after the mounts, their missing parents made for everyone to pass. */
  volumes?: readonly Mount[];
  /**
   * The job's own /etc/hosts and /etc/resolv.conf when it has egress (job-network.ts fills
   * them before the job starts); null: loopback only, so no resolver files.
   */
  networkFiles: NetworkFiles | null;
  /** The /etc/hosts naming localhost, for a job without networkFiles (shared-files.ts writeLoopbackHosts). */
  loopbackHosts: string;
  /**
   * The job stays in the network namespace bwrap runs in: a microVM guest's, whose one link
   * leads to the host's egress proxy of the VM's job (qemu-vm.ts); never on the host.
   */
  vmNetwork: boolean;
  /**
   * The host directory (a mount of the launcher's own namespace, image-root.c) that is the
   * sandbox's whole root, writable: an image's layers (or the host's system, system-root.ts) under
   * the sandbox's own layer. Without it the root is the host's system, read-only, as `layout`
   * picks it.
   */
  imageRoot?: string;
  /**
   * A program bound as sudo (SandboxTemplate.sudo) on a writable root, at SUDO_PATH, in front of
   * any of the system's.
   */
  sudo?: string;
  /** System files made absent (shells when the policy forbids them): each covered by /dev/null. */
  hidden: readonly string[];
  /** bwrap's own /dev, with a devpts instance of the sandbox's own (ptmx, pts/) and tty. */
  terminals: boolean;
  /** argv is the sandbox's init (SandboxTemplate.runsAsInit): pid 1 itself, with no bwrap init above it. */
  asInit?: boolean;
  tmpBytes: number;
  shmBytes: number;
  /** bwrap sets everything up, then waits for a byte on this fd before it execs the job. */
  blockFd?: number;
  /** bwrap writes the sandbox's pid (and namespace ids) here as JSON, then closes it. */
  infoFd?: number;
  /** bwrap writes its --json-status-fd lines here: the pid, then an exit code if it ran the job. */
  statusFd?: number;
  /** fd holding the BPF syscall filter (seccomp.ts), applied just before exec. */
  seccompFd?: number;
  /**
   * The job runs as root of its user namespace (the template's `rootInside`): bwrap waits on this
   * fd while the host writes the namespace's two-uid map (it reports its pid on infoFd first).
   * The seccomp filter must be given: it, not --disable-userns (which bwrap refuses with a map
   * written from outside), is what keeps the job from nested user namespaces.
   */
  rootInside?: { usernsBlockFd: number };
}

/**
 * Every isolation flag in one place, readable top to bottom (and printable by a test).
 * Mount order matters: later mounts land inside earlier ones (the job dir inside /tmp).
 */
export function buildBwrapArgs(plan: BwrapPlan): string[] {
  // Each flag stays on one line with its operands.
  // prettier-ignore
  const args: string[] = [
    ...(plan.blockFd !== undefined ? ['--block-fd', String(plan.blockFd)] : []),
    ...(plan.infoFd !== undefined ? ['--info-fd', String(plan.infoFd)] : []),
    ...(plan.statusFd !== undefined ? ['--json-status-fd', String(plan.statusFd)] : []),
    // Namespaces: user, pid, ipc, uts, cgroup, mount, net. Egress, when allowed, is attached
    // to the job's own network namespace from outside (job-network.ts), never the host's; in a
    // microVM the guest's may be kept, which reaches only the host's egress proxy.
    '--unshare-user',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup',
    ...(plan.vmNetwork ? [] : ['--unshare-net']),
    ...identityArgs(plan),
    '--hostname', SANDBOX_HOSTNAME,
    // Lifetime: the job dies with its supervisor and cannot reach our terminal (TIOCSTI).
    '--die-with-parent',
    '--new-session',
    ...(plan.asInit ? ['--as-pid-1'] : []),
    ...(plan.seccompFd !== undefined ? ['--seccomp', String(plan.seccompFd)] : []),
    // Environment: exactly what the caller listed.
    '--clearenv',
  ];
  for (const [key, value] of Object.entries(plan.env)) args.push('--setenv', key, value);

  if (plan.imageRoot !== undefined) {
    // An image's root, whole and writable (its own /usr, /etc...): what follows lands on top.
    args.push('--bind', plan.imageRoot, '/');
  } else {
    // Read-only system: /usr and the merged-/usr links, a hand-picked /etc.
    for (const dir of plan.layout.directories) args.push('--ro-bind', dir, dir);
    for (const { path, target } of [...plan.layout.symlinks, ...plan.layout.ownLinks]) args.push('--symlink', target, path);
    // /dev/null bound nodev cannot be opened: neither executed, nor read to be copied or loaded.
    for (const path of plan.hidden) args.push('--ro-bind', '/dev/null', path);
    // bwrap makes the parent of a file it binds 0700, its own: with root inside, the user could not
    // read /etc or /etc/ssl. Made first, 0755 as on every system.
    for (const dir of etcDirectories(plan)) args.push('--perms', '0755', '--dir', dir);
    for (const path of plan.layout.etc) args.push('--ro-bind', path, path);
  }
  if (plan.networkFiles) args.push('--ro-bind', plan.networkFiles.hosts, '/etc/hosts', '--ro-bind', plan.networkFiles.resolvConf, '/etc/resolv.conf');
  else args.push('--ro-bind', plan.loopbackHosts, '/etc/hosts');
  if (plan.networkFiles?.caBundle) args.push('--ro-bind', plan.networkFiles.caBundle, CA_BUNDLE_SANDBOX_PATH);
  if (plan.identityFiles) args.push('--ro-bind', plan.identityFiles.passwd, '/etc/passwd', '--ro-bind', plan.identityFiles.group, '/etc/group');

  // Fresh kernel views: procfs of the job's PID namespace, no /sys, and a /dev of five
  // harmless devices (no tty, no pts, no kvm), read-only but for its /dev/shm. A sandbox with
  // terminals gets bwrap's /dev instead: the same devices plus tty, and a devpts instance of its
  // own (new in its user namespace, so it sees no host terminal); still no kvm, nothing else.
  args.push('--proc', '/proc', '--ro-bind', plan.meminfo, '/proc/meminfo', '--ro-bind', plan.bootId, BOOT_ID_PATH);
  if (plan.terminals) {
    args.push('--dev', '/dev');
  } else {
    args.push('--size', String(DEV_TMPFS_BYTES), '--tmpfs', '/dev');
    for (const device of DEVICES) args.push('--dev-bind', device, device);
    for (const [link, target] of DEV_LINKS) args.push('--symlink', target, link);
  }
  args.push('--perms', '1777', '--size', String(plan.shmBytes), '--tmpfs', '/dev/shm', '--remount-ro', '/dev');

  // Writable space is size-limited tmpfs only, gone when the job ends; everyone's, sticky, as a
  // /tmp is (bwrap makes it its user's, and with root inside that is not the user).
  args.push('--perms', '1777', '--size', String(plan.tmpBytes), '--tmpfs', '/tmp');
  // Root's home, root's alone: on a writable root its own (made where an image has none), on a
  // read-only system a size-limited tmpfs, as /tmp.
  if (plan.rootInside && plan.imageRoot !== undefined) args.push('--perms', '0700', '--dir', '/root');
  else if (plan.rootInside) args.push('--perms', '0700', '--size', String(plan.tmpBytes), '--tmpfs', '/root');
  args.push('--dir', plan.cwd);

  for (const mount of plan.mounts) args.push(mount.writable ? '--bind' : '--ro-bind', mount.host, mount.sandbox);
  for (const volume of plan.volumes ?? []) {
    // The user reaches its volume (bwrap would make /mnt of /mnt/data 0700, root's); a directory there already is left as it is.
    for (const dir of parentsOf(volume.sandbox)) args.push('--perms', '0755', '--dir', dir);
    args.push(volume.writable ? '--bind' : '--ro-bind', volume.host, volume.sandbox);
  }
  if (plan.sudo !== undefined) {
    // Its directories 0755 where an image has none (bwrap makes a bind's parents 0700, root's).
    for (const dir of ['/usr/local', '/usr/local/bin']) args.push('--perms', '0755', '--dir', dir);
    args.push('--ro-bind', plan.sudo, SUDO_PATH);
  }
  // The root bwrap builds is a tmpfs of mount points; freeze it so / and /etc take no writes.
  if (plan.imageRoot === undefined) args.push('--remount-ro', '/');

  args.push('--chdir', plan.cwd, '--', ...plan.argv);
  return args;
}

/**
 * /etc and each directory under it that holds a system file the job gets there, parents first
 * (the identity, resolver and CA files are bound straight into /etc).
 */
function etcDirectories(plan: BwrapPlan): string[] {
  const directories = new Set<string>(['/etc']);
  for (const file of plan.layout.etc) {
    for (let dir = posix.dirname(file); dir.startsWith('/etc/'); dir = posix.dirname(dir)) directories.add(dir);
  }
  return [...directories].sort();
}

/**
 * Who the job is. As the user: uid 1000 alone in its namespace, no capability, and no nested user
 * namespaces (the usual first step of a kernel exploit). As root inside: uid 0 with
 * ROOT_INSIDE_CAPABILITIES, in a namespace whose map the host writes (uid 1000 mapped too).
 */
function identityArgs(plan: BwrapPlan): string[] {
  if (!plan.rootInside) return ['--uid', String(SANDBOX_UID), '--gid', String(SANDBOX_GID), '--disable-userns', '--cap-drop', 'ALL'];
  if (plan.seccompFd === undefined || plan.infoFd === undefined) throw new Error('root inside a sandbox needs the seccomp filter and the info fd');
  const added = ROOT_INSIDE_CAPABILITIES.flatMap((capability) => ['--cap-add', capability]);
  return ['--userns-block-fd', String(plan.rootInside.usernsBlockFd), '--uid', '0', '--gid', '0', '--cap-drop', 'ALL', ...added];
}

/**
 * Every flag of the `workspace` profile, in order (later mounts land on top of earlier ones):
 * the view of workspace-profile.ts, layer by layer, on an empty root that is then frozen.
 * The job's environment reaches it through bwrap's own environment, never argv, so values
 * stay out of /proc/<pid>/cmdline.
 */
export function workspaceSandboxArgs(plan: WorkspacePlan): string[] {
  const size = String(plan.tmpBytes);
  // Each flag stays on one line with its operands.
  // prettier-ignore
  const args = [
    // Its own user namespace keeps the host's mounts locked read-only for the job; its own PID
    // namespace makes the whole tree, double forks included, die with it.
    '--unshare-user',
    '--unshare-pid',
    '--unshare-ipc',
    ...(plan.network === 'none' ? ['--unshare-net'] : []),
    '--disable-userns',
    '--cap-drop', 'ALL',
    // It dies with its supervisor and cannot reach a terminal (TIOCSTI).
    '--die-with-parent',
    '--new-session',
    '--json-status-fd', String(plan.statusFd),
  ];
  /** Hidden directories are frozen last, so a path named inside one can still be mounted there. */
  const frozen: string[] = [];
  for (const layer of viewLayers(plan)) {
    switch (layer.op) {
      case 'symlink':
        args.push('--symlink', layer.target, layer.path);
        break;
      case 'read-only':
        args.push('--ro-bind', layer.path, layer.path);
        break;
      case 'writable':
        args.push('--bind', layer.path, layer.path);
        break;
      // Secrets: an empty directory (read-only once frozen), or /dev/null, which bwrap mounts
      // nodev, so opening it fails.
      case 'hide-dir':
        args.push('--tmpfs', layer.path);
        frozen.push(layer.path);
        break;
      case 'hide-file':
        args.push('--ro-bind', '/dev/null', layer.path);
        break;
      // Fresh kernel views: procfs of the job's PID namespace; bwrap's small /dev, read-only
      // but for a size-limited /dev/shm.
      case 'proc':
        args.push('--proc', layer.path);
        break;
      case 'dev':
        args.push('--dev', layer.path, '--size', size, '--tmpfs', `${layer.path}/shm`, '--remount-ro', layer.path);
        break;
      // Private scratch (/tmp, the home): tools need it, the host must not see it, and as RAM
      // it is bounded.
      case 'scratch':
        args.push('--size', size, '--tmpfs', layer.path);
        break;
    }
  }
  for (const path of frozen) args.push('--remount-ro', path);
  // The root bwrap builds is a tmpfs of mount points; freeze it so nothing lands beside them.
  args.push('--remount-ro', '/', '--chdir', plan.cwd, '--', ...plan.argv);
  return args;
}

/** The directories above an absolute path, outermost first, `/` left out: `/mnt/a/b` has `/mnt` and `/mnt/a`. */
function parentsOf(path: string): string[] {
  const parents: string[] = [];
  for (let dir = posix.dirname(path); dir !== '/'; dir = posix.dirname(dir)) parents.unshift(dir);
  return parents;
}
