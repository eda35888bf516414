import { SANDBOX_GID, SANDBOX_HOSTNAME, SANDBOX_UID } from './bwrap-argv.js';
import type { HostLayout } from './host-layout.js';
import type { CgroupLimits } from './cgroups.js';
import type { Mount, ResourceLimits } from './types.js';

export interface OciPlan {
  layout: HostLayout;
  identityFiles: { passwd: string; group: string };
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
  /** Every writable mount is noexec: nothing the job writes can be executed. */
  noexecWritable: boolean;
  tmpBytes: number;
  limits: ResourceLimits;
  /** The job's host cgroup (cgroups.ts), made before runsc joins it, and its limits. */
  cgroup: { path: string; limits: CgroupLimits };
}

interface OciMount {
  destination: string;
  type: string;
  source: string;
  options: string[];
}

const CPU_PERIOD_US = 100_000;

/**
 * The OCI runtime config of one job (config.json of its bundle): the same view as the
 * bubblewrap profile (bwrap-argv.ts), but the kernel the job talks to is gVisor's. Later mounts
 * land inside earlier ones, so the order matters as in bwrap.
 */
export function buildOciConfig(plan: OciPlan): object {
  const { limits } = plan;
  const cgroup = plan.cgroup.limits;
  const noexec = plan.noexecWritable ? ['noexec'] : [];
  const readOnly = (source: string, destination: string): OciMount => ({ destination, type: 'bind', source, options: ['rbind', 'ro', 'nosuid', 'nodev'] });
  const mounts: OciMount[] = [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    // No view of the (gVisor) sysfs, as in the bubblewrap profile.
    { destination: '/sys', type: 'tmpfs', source: 'tmpfs', options: ['ro', 'size=4k', 'mode=0555'] },
    ...plan.layout.directories.map((dir) => readOnly(dir, dir)),
    ...plan.hidden.map((path) => readOnly(plan.emptyFile, path)),
    ...plan.layout.etc.map((path) => readOnly(path, path)),
    readOnly(plan.identityFiles.passwd, '/etc/passwd'),
    readOnly(plan.identityFiles.group, '/etc/group'),
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
  ];
  return {
    ociVersion: '1.0.2',
    hostname: SANDBOX_HOSTNAME,
    // The root is an empty directory but for the merged-/usr links: everything else is a mount.
    root: { path: 'rootfs', readonly: true },
    process: {
      terminal: false,
      user: { uid: SANDBOX_UID, gid: SANDBOX_GID, additionalGids: [] },
      args: plan.argv,
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
      namespaces: ['pid', 'network', 'ipc', 'uts', 'mount'].map((type) => ({ type })),
      cgroupsPath: plan.cgroup.path,
      // The same limits the group already has: runsc sizes the sandbox's memory from them.
      resources: {
        ...(cgroup.memoryBytes !== null ? { memory: { limit: cgroup.memoryBytes } } : {}),
        pids: { limit: cgroup.maxProcesses },
        ...(cgroup.cpuCores !== null ? { cpu: { quota: Math.round(cgroup.cpuCores * CPU_PERIOD_US), period: CPU_PERIOD_US } } : {}),
      },
    },
  };
}
