import { detectCgroups, JobCgroup } from '../isolation/host/cgroups.js';
import { resolveExecutable } from '../isolation/command-path.js';

/**
 * What one job may use, whatever it runs: processes, memory, CPU, private tmpfs and log bytes.
 * The sandbox's own parts enforce them: a fresh cgroup per job (isolation/host/cgroups.ts) joined
 * before bwrap starts, rlimits through prlimit as the backstop, bwrap's --size for each tmpfs,
 * and the supervisor's log writer for the logs.
 */
export interface JobLimits {
  /** Processes and threads of the job (bwrap's two included): pids.max, and RLIMIT_NPROC. */
  max_processes: number;
  /** Memory of the job, its tmpfs pages included: the memory cgroup's limit. */
  memory_bytes: number;
  /** CPU bandwidth in cores; null for no bound. */
  cpus: number | null;
  /** Size of each private tmpfs of a workspace-sandboxed job: /tmp, /dev/shm and the home. */
  tmp_bytes: number;
  /** Bytes kept of each log (stdout.log, stderr.log, full.log); past it the oldest are dropped. */
  max_log_bytes: number;
}

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

export const DEFAULT_LIMITS: JobLimits = {
  max_processes: 1024,
  memory_bytes: 4 * GiB,
  cpus: null,
  tmp_bytes: 1 * GiB,
  max_log_bytes: 64 * MiB,
};

/** The least each limit may be set to: below it the sandbox itself could not start or log. */
export const LIMIT_FLOORS = { max_processes: 8, memory_bytes: 32 * MiB, tmp_bytes: 64 * KiB, max_log_bytes: 64 * KiB } as const;

/** How the limits were enforced, as the job's record tells it. */
export type LimitEnforcement = 'cgroup-v1' | 'cgroup-v2' | 'rlimits';

/** Limits of jobs defined before jobs had limits: the defaults (a restart gets them too). */
export function limitsOf(definition: { limits?: JobLimits }): JobLimits {
  return { ...DEFAULT_LIMITS, ...definition.limits };
}

/** The job's cgroup when the host has a writable hierarchy (as root); none when limits fall back to rlimits. */
export async function createJobCgroup(limits: JobLimits): Promise<{ cgroup: JobCgroup | null; enforcedBy: LimitEnforcement }> {
  const host = await detectCgroups();
  if (host === null) return { cgroup: null, enforcedBy: 'rlimits' };
  const cgroup = await JobCgroup.create(host, { memoryBytes: limits.memory_bytes, maxProcesses: limits.max_processes, cpuCores: limits.cpus }, null);
  return { cgroup, enforcedBy: `cgroup-${host.version}` };
}

/**
 * Moves the launcher into the job's cgroups, then becomes the rest of argv (prlimit, then
 * bwrap or the job): so bwrap and all it starts are in the group from their first instruction,
 * and the supervisor itself is not (the job's limits are not its own).
 */
const JOIN_CGROUPS = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"';

/**
 * The launcher chain around `command`: [sh join-cgroups] -> [prlimit] -> command. rlimits are
 * the backstop behind the cgroup: RLIMIT_NPROC (which root, and so a job of root's, is exempt
 * from), no core files, and without a cgroup RLIMIT_DATA for memory per process.
 */
export function launcherArgv(command: readonly string[], limits: JobLimits, cgroup: { procsFiles(): string[] } | null, tools: { sh: string; prlimit: string | null }): string[] {
  const rlimits = [`--nproc=${limits.max_processes}`, '--core=0', ...(cgroup === null ? [`--data=${limits.memory_bytes}`] : [])];
  const chain = tools.prlimit === null ? [...command] : [tools.prlimit, ...rlimits, '--', ...command];
  return cgroup === null ? chain : [tools.sh, '-c', JOIN_CGROUPS, 'sh', ...cgroup.procsFiles(), '--', ...chain];
}

/** The tools of the chain, from PATH (prlimit is util-linux's; without it only the cgroup limits). */
export function launcherTools(env: NodeJS.ProcessEnv): { sh: string; prlimit: string | null } {
  const path = env.PATH?.split(':');
  return { sh: '/bin/sh', prlimit: resolveExecutable('prlimit', path, '/', () => true) ?? resolveExecutable('/usr/bin/prlimit', undefined, '/', () => true) };
}
