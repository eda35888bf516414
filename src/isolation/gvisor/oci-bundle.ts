import { SANDBOX_GID, SANDBOX_HOSTNAME, SANDBOX_UID } from '../bubblewrap/bwrap-argv.js';
import type { HostLayout } from '../host/host-layout.js';
import type { CgroupLimits } from '../host/cgroups.js';
import { CLONE_NEW_FLAG_BITS, DENIED_SYSCALLS, EPERM, TIOCLINUX, TIOCSTI } from '../host/seccomp.js';
import type { Mount, ResourceLimits } from '../types.js';

export interface OciPlan {
  layout: HostLayout;
  /** The sandbox's /etc/passwd and /etc/group; null: the image's own. */
  identityFiles: { passwd: string; group: string } | null;
  /** The /etc/hosts naming localhost (shared-files.ts writeLoopbackHosts); null where the job's network stages its own. */
  loopbackHosts: string | null;
  /**
   * An image's root (a template made of one): the overlay image-root mounts, writable, as the
   * sandbox's / instead of the host's system; absent: the host's system, read-only.
   */
  imageRoot?: string;
  argv: readonly string[];
  cwd: string;
  env: Readonly<Record<string, string>>;
  /** Host paths bound in (toolchains, the work dir, staged files), after the system mounts. */
  mounts: readonly Mount[];
  /** Directories made as empty scratch space owned by the sandbox user (a cwd nothing else provides). */
  scratch: readonly string[];
  /** System files made absent (shells when the policy forbids them), each covered by `emptyFile`. */
  hidden: readonly string[];
  /** A host file that is empty and not executable. */
  emptyFile: string;
  /**
   * What the job may execute, enforced by mounts (gVisor has no Landlock): `any`; `system`,
   * every writable mount noexec, so nothing the job writes runs; `only` these sandbox paths
   * (files or trees), every mount noexec and each of these bound read-only over itself without.
   */
  executable: OciExecutable;
  tmpBytes: number;
  limits: ResourceLimits;
  /** The job's host cgroup (cgroups.ts), made before runsc joins it, and its limits. */
  cgroup: { path: string; limits: CgroupLimits };
  /** A network namespace the host made and equipped for the job (held-netns.ts), which runsc joins; null: a new one, loopback only. */
  netns: string | null;
  /**
   * The sandbox's own syscall filter (seccomp.ts, as bubblewrap gives it), put on the job by
   * native/seccomp-exec.c, host paths of both: the job's argv runs under it (buildOciSeccomp says why).
   */
  jobFilter: { helper: string; filter: string };
}

/** Where the job's filter and the program that puts it on are bound. */
export const JOB_FILTER_PATHS = { helper: '/.agent-runner/seccomp-exec', filter: '/.agent-runner/seccomp.bpf' } as const;

export type OciExecutable = 'any' | 'system' | { only: readonly string[] };

interface OciMount {
  destination: string;
  type: string;
  source: string;
  options: string[];
}

interface OciSeccompArg {
  index: number;
  value: number;
  valueTwo: number;
  op: 'SCMP_CMP_MASKED_EQ';
}

interface OciSeccompRule {
  names: string[];
  action: 'SCMP_ACT_ERRNO';
  errnoRet: number;
  args?: OciSeccompArg[];
}

const CPU_PERIOD_US = 100_000;
const S_IFMT = 0o170000;
const S_IFCHR = 0o020000;
const S_IFBLK = 0o060000;
const LOW_32_BITS = 0xffffffff;

/**
 * The syscall filter of seccomp.ts as an OCI `linux.seccomp` section, which gVisor applies to
 * the job's system calls in its own kernel (runsc --oci-seccomp). What stays out, and why:
 *  - clone3: runsc before 2025 ignores `errnoRet` (every refusal is EPERM), and glibc falls
 *    back to clone only on ENOSYS, so a rule would stop every thread and fork. The 2022 runsc
 *    answers clone3 ENOSYS itself; a later one serves it (and its CLONE_NEW* flags, in memory
 *    no rule can read). So the job also runs under the bubblewrap filter of its own
 *    (plan.jobFilter), which gVisor's kernel applies as Linux does: clone3 ENOSYS there, as
 *    test/integration/isolation/gvisor.test.ts holds to on either runsc;
 *  - other ABIs: gVisor serves x86_64 system calls only and ignores `architectures`;
 *  - personality: an allowlist of values cannot be written (gVisor ORs the comparisons of one
 *    argument), and ADDR_NO_RANDOMIZE there only changes the layout gVisor gives the job.
 * One addition: gVisor's mknod makes device nodes without CAP_MKNOD (on bubblewrap the kernel
 * refuses them for that), so char and block devices are refused here; FIFOs and sockets pass.
 */
export function buildOciSeccomp(): { defaultAction: 'SCMP_ACT_ALLOW'; syscalls: OciSeccompRule[] } {
  const refuse = (names: string[], args?: OciSeccompArg[]): OciSeccompRule => ({ names, action: 'SCMP_ACT_ERRNO', errnoRet: EPERM, ...(args ? { args } : {}) });
  const masked = (index: number, mask: number, value: number): OciSeccompArg => ({ index, value: mask, valueTwo: value, op: 'SCMP_CMP_MASKED_EQ' });
  return {
    defaultAction: 'SCMP_ACT_ALLOW',
    syscalls: [
      refuse([...DENIED_SYSCALLS]),
      // A rule a flag: several comparisons of one argument in one rule are ANDed by libseccomp.
      ...CLONE_NEW_FLAG_BITS.map((bit) => refuse(['clone'], [masked(0, bit, bit)])),
      // The kernel reads the request as 32 bits: high bits set must not slip past the comparison.
      ...[TIOCSTI, TIOCLINUX].map((request) => refuse(['ioctl'], [masked(1, LOW_32_BITS, request)])),
      ...[S_IFCHR, S_IFBLK].flatMap((type) => [refuse(['mknod'], [masked(1, S_IFMT, type)]), refuse(['mknodat'], [masked(2, S_IFMT, type)])]),
    ],
  };
}

/**
 * The OCI runtime config of one job (config.json of its bundle): the same view as the
 * bubblewrap profile (bwrap-argv.ts), but the kernel the job talks to is gVisor's. Later mounts
 * land inside earlier ones, so the order matters as in bwrap.
 */
export function buildOciConfig(plan: OciPlan): object {
  const { limits } = plan;
  const cgroup = plan.cgroup.limits;
  const noexec = plan.executable === 'any' ? [] : ['noexec'];
  const only = typeof plan.executable === 'object' ? plan.executable.only : null;
  const systemNoexec = only === null ? [] : ['noexec'];
  const readOnly = (source: string, destination: string, extra: readonly string[] = systemNoexec): OciMount => ({
    destination,
    type: 'bind',
    source,
    options: ['rbind', 'ro', 'nosuid', 'nodev', ...extra],
  });
  const mounts: OciMount[] = [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    // No view of the (gVisor) sysfs, as in the bubblewrap profile.
    { destination: '/sys', type: 'tmpfs', source: 'tmpfs', options: ['ro', 'size=4k', 'mode=0555'] },
    // An image brings its own system; the host's is bound in only where there is none.
    ...(plan.imageRoot === undefined
      ? [
          ...plan.layout.directories.map((dir) => readOnly(dir, dir)),
          ...plan.hidden.map((path) => readOnly(plan.emptyFile, path)),
          ...plan.layout.etc.map((path) => readOnly(path, path)),
        ]
      : []),
    ...(plan.identityFiles ? [readOnly(plan.identityFiles.passwd, '/etc/passwd'), readOnly(plan.identityFiles.group, '/etc/group')] : []),
    ...(plan.loopbackHosts !== null ? [readOnly(plan.loopbackHosts, '/etc/hosts')] : []),
    readOnly(plan.jobFilter.helper, JOB_FILTER_PATHS.helper, []),
    readOnly(plan.jobFilter.filter, JOB_FILTER_PATHS.filter),
    { destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: [`size=${plan.tmpBytes}`, 'mode=1777', 'nosuid', 'nodev', ...noexec] },
    ...plan.scratch.map((dir) => ({
      destination: dir,
      type: 'tmpfs',
      source: 'tmpfs',
      options: [`size=${plan.tmpBytes}`, 'mode=0755', `uid=${SANDBOX_UID}`, `gid=${SANDBOX_GID}`, 'nosuid', 'nodev', ...noexec],
    })),
    ...plan.mounts.map((mount) =>
      mount.writable
        ? { destination: mount.sandbox, type: 'bind', source: mount.host, options: ['rbind', 'rw', 'nosuid', 'nodev', ...noexec] }
        : readOnly(mount.host, mount.sandbox),
    ),
    // Last, so each lands on the noexec mount that holds it: the allowed files alone stay executable.
    // A hidden shell stays hidden even when listed: allow_shell is false.
    ...(only ?? []).filter((path) => !plan.hidden.includes(path)).map((path) => readOnly(hostPathOf(path, plan.mounts), path, [])),
  ];
  return {
    ociVersion: '1.0.2',
    hostname: SANDBOX_HOSTNAME,
    // The root is an empty directory but for the merged-/usr links: everything else is a mount.
    // An image's is its overlay, whose writes go to the sandbox's own layer.
    root: plan.imageRoot === undefined ? { path: 'rootfs', readonly: true } : { path: plan.imageRoot, readonly: false },
    process: {
      terminal: false,
      user: { uid: SANDBOX_UID, gid: SANDBOX_GID, additionalGids: [] },
      args: [JOB_FILTER_PATHS.helper, JOB_FILTER_PATHS.filter, '--', ...plan.argv],
      cwd: plan.cwd,
      env: Object.entries(plan.env).map(([key, value]) => `${key}=${value}`),
      capabilities: { bounding: [], effective: [], inheritable: [], permitted: [], ambient: [] },
      noNewPrivileges: true,
      rlimits: [
        { type: 'RLIMIT_NOFILE', hard: limits.maxOpenFiles, soft: limits.maxOpenFiles },
        { type: 'RLIMIT_FSIZE', hard: limits.maxFileBytes, soft: limits.maxFileBytes },
        { type: 'RLIMIT_CORE', hard: 0, soft: 0 },
        // gVisor enforces RLIMIT_AS itself: python gets its MemoryError, as on bubblewrap.
        ...(limits.memoryMechanism === 'address-space' ? [{ type: 'RLIMIT_AS', hard: limits.memoryBytes, soft: limits.memoryBytes }] : []),
      ],
    },
    mounts,
    linux: {
      namespaces: ['pid', 'network', 'ipc', 'uts', 'mount'].map((type) => (type === 'network' && plan.netns !== null ? { type, path: plan.netns } : { type })),
      cgroupsPath: plan.cgroup.path,
      seccomp: buildOciSeccomp(),
      // The same limits the group already has: runsc sizes the sandbox's memory from them.
      resources: {
        ...(cgroup.memoryBytes !== null ? { memory: { limit: cgroup.memoryBytes } } : {}),
        pids: { limit: cgroup.maxProcesses },
        ...(cgroup.cpuCores !== null ? { cpu: { quota: Math.round(cgroup.cpuCores * CPU_PERIOD_US), period: CPU_PERIOD_US } } : {}),
      },
    },
  };
}

/** Where a sandbox path comes from on the host: a bound mount's source, else the system's own path. */
function hostPathOf(path: string, mounts: readonly Mount[]): string {
  const mount = [...mounts].reverse().find((candidate) => path === candidate.sandbox || path.startsWith(`${candidate.sandbox}/`));
  return mount === undefined ? path : mount.host + path.slice(mount.sandbox.length);
}
