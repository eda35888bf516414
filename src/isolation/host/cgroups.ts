import { constants, existsSync, readFileSync } from 'node:fs';
import { access, chown, mkdir, readFile, readdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isAlive, signalQuietly } from './process-tree.js';

/**
 * Per-job cgroups: a fresh group for every job (a reused one keeps pids charged for a while).
 * v1 (separate memory and pids hierarchies) and v2 (one unified hierarchy) are both handled;
 * without either, limits fall back to rlimits and the backend says so.
 */
export type CgroupVersion = 'v1' | 'v2';

export interface CgroupHost {
  version: CgroupVersion;
  /** Directory under which this process creates its job groups, per controller for v1 (cpu, cpuacct and freezer are optional). */
  parents: { memory: string; pids: string; cpu: string | null; cpuacct: string | null; freezer: string | null };
}

export interface CgroupLimits {
  memoryBytes: number | null;
  maxProcesses: number;
  /** CPU bandwidth in cores (1.5 = one and a half); null leaves it unbounded. */
  cpuCores: number | null;
}

const CPU_PERIOD_US = 100_000;
/** How long freeze() waits for every process to stop (a process in an uninterruptible wait stops only when it leaves it). */
const FREEZE_WAIT_MS = 1000;

const ROOT = '/sys/fs/cgroup';
const GROUP_PREFIX = 'agent-runner';

let detected: Promise<CgroupHost | null> | undefined;

/** Finds a writable hierarchy with memory and pids controllers; null when there is none. */
export function detectCgroups(): Promise<CgroupHost | null> {
  detected ??= probe();
  return detected;
}

async function probe(): Promise<CgroupHost | null> {
  const v2Controllers = join(ROOT, 'cgroup.controllers');
  if (existsSync(v2Controllers)) {
    const controllers = readFileSync(v2Controllers, 'utf8').split(/\s+/);
    if (!controllers.includes('memory') || !controllers.includes('pids')) return null;
    const parent = join(ROOT, GROUP_PREFIX);
    const wanted = controllers.includes('cpu') ? '+memory +pids +cpu' : '+memory +pids';
    try {
      await mkdir(parent, { recursive: true });
      await writeFile(join(ROOT, 'cgroup.subtree_control'), wanted);
      await writeFile(join(parent, 'cgroup.subtree_control'), wanted);
      // cpu.stat (the usage) is in every v2 group, with or without the cpu controller.
      // cgroup.freeze too (Linux 5.2 on).
      return { version: 'v2', parents: { memory: parent, pids: parent, cpu: controllers.includes('cpu') ? parent : null, cpuacct: parent, freezer: parent } };
    } catch {
      return null;
    }
  }
  const memory = join(ROOT, 'memory', GROUP_PREFIX);
  const pids = join(ROOT, 'pids', GROUP_PREFIX);
  try {
    await access(join(ROOT, 'memory', 'memory.limit_in_bytes'), constants.R_OK);
    await access(join(ROOT, 'pids', 'cgroup.procs'), constants.R_OK);
    await mkdir(memory, { recursive: true });
    await mkdir(pids, { recursive: true });
    await access(memory, constants.W_OK);
    await access(pids, constants.W_OK);
    const cpuacct = await optionalV1Parent('cpuacct', 'cpuacct.usage_user');
    const freezer = await optionalV1Parent('freezer', 'cgroup.procs');
    return { version: 'v1', parents: { memory, pids, cpu: await optionalV1Parent('cpu', 'cpu.cfs_quota_us'), cpuacct, freezer } };
  } catch {
    return null;
  }
}

/** A v1 controller that improves limits but is not required (cpu bandwidth). */
async function optionalV1Parent(controller: string, probeFile: string): Promise<string | null> {
  const parent = join(ROOT, controller, GROUP_PREFIX);
  try {
    await access(join(ROOT, controller, probeFile), constants.R_OK);
    await mkdir(parent, { recursive: true });
    await access(parent, constants.W_OK);
    return parent;
  } catch {
    return null;
  }
}

let sequence = 0;

interface JobDirs {
  memory: string;
  pids: string;
  cpu: string | null;
  /** Where CPU time is counted (v1: its own hierarchy; v2: the one group). */
  cpuacct: string | null;
  /** Where its processes are frozen (freeze()). */
  freezer: string | null;
}

/** What a job's group used, read once it ended; null where this host does not count it. */
export interface CgroupUsage {
  cpuUserMs: number | null;
  cpuSystemMs: number | null;
  peakMemoryBytes: number | null;
}

/** A job without a group (rlimits only), or one whose sandbox died before it could say. */
export const UNCOUNTED: CgroupUsage = { cpuUserMs: null, cpuSystemMs: null, peakMemoryBytes: null };

export class JobCgroup {
  private constructor(
    private readonly host: CgroupHost,
    private readonly dirs: JobDirs,
    /** The group's path below each hierarchy's root, as an OCI runtime names it (cgroupsPath). */
    readonly hierarchyPath: string,
  ) {}

  /** Each group directory once (v2 has one for all controllers). */
  private get unique(): string[] {
    return eachDirOnce(this.dirs);
  }

  /**
   * Creates the job's groups with their limits. `ownerUid` may then move itself in, so the
   * launcher can join before it execs into the sandbox without staying root.
   */
  static async create(host: CgroupHost, limits: CgroupLimits, ownerUid: number | null): Promise<JobCgroup> {
    const name = `${process.pid}-${++sequence}-${Date.now().toString(36)}`;
    const useCpu = host.parents.cpu !== null && limits.cpuCores !== null;
    const dirs: JobDirs = {
      memory: join(host.parents.memory, name),
      pids: join(host.parents.pids, name),
      cpu: useCpu ? join(host.parents.cpu!, name) : null,
      cpuacct: host.parents.cpuacct === null ? null : join(host.parents.cpuacct, name),
      freezer: host.parents.freezer === null ? null : join(host.parents.freezer, name),
    };
    const group = new JobCgroup(host, dirs, `/${GROUP_PREFIX}/${name}`);
    for (const dir of group.unique) await mkdir(dir);
    try {
      await group.applyLimits(limits);
      if (ownerUid !== null) for (const file of group.procsFiles()) await chown(file, ownerUid, ownerUid);
    } catch (error) {
      await group.dispose();
      throw error;
    }
    return group;
  }

  private async applyLimits(limits: CgroupLimits): Promise<void> {
    const { memory, pids, cpu } = this.dirs;
    await writeFile(join(pids, 'pids.max'), String(limits.maxProcesses));
    if (cpu && limits.cpuCores !== null) {
      const quota = String(Math.max(1000, Math.round(limits.cpuCores * CPU_PERIOD_US)));
      if (this.host.version === 'v2') await writeFile(join(cpu, 'cpu.max'), `${quota} ${CPU_PERIOD_US}`);
      else {
        await writeFile(join(cpu, 'cpu.cfs_period_us'), String(CPU_PERIOD_US));
        await writeFile(join(cpu, 'cpu.cfs_quota_us'), quota);
      }
    }
    if (limits.memoryBytes === null) return;
    if (this.host.version === 'v2') {
      await writeFile(join(memory, 'memory.max'), String(limits.memoryBytes));
      await writeFile(join(memory, 'memory.swap.max'), '0').catch(() => undefined);
      return;
    }
    await writeFile(join(memory, 'memory.limit_in_bytes'), String(limits.memoryBytes));
    // memsw exists only with swap accounting; without it there is no swap to bound.
    await writeFile(join(memory, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes)).catch(() => undefined);
  }

  procsFiles(): string[] {
    return this.unique.map((dir) => join(dir, 'cgroup.procs'));
  }

  async oomKilled(): Promise<boolean> {
    const memoryDir = this.dirs.memory;
    const file = this.host.version === 'v2' ? 'memory.events' : 'memory.oom_control';
    const match = /^oom_kill (\d+)$/m.exec(readCount(memoryDir, file));
    return match !== null && Number(match[1]) > 0;
  }

  async usage(): Promise<CgroupUsage> {
    const number = (text: string, scale: number) => (/^\d+$/.test(text.trim()) ? Math.round(Number(text.trim()) / scale) : null);
    if (this.host.version === 'v2') {
      const stat = readCount(this.dirs.cpuacct, 'cpu.stat');
      const field = (name: string) => {
        const match = new RegExp(`^${name} (\\d+)$`, 'm').exec(stat);
        return match ? Math.round(Number(match[1]) / 1000) : null;
      };
      // memory.peak exists from Linux 5.19.
      return { cpuUserMs: field('user_usec'), cpuSystemMs: field('system_usec'), peakMemoryBytes: number(readCount(this.dirs.memory, 'memory.peak'), 1) };
    }
    return {
      cpuUserMs: number(readCount(this.dirs.cpuacct, 'cpuacct.usage_user'), 1e6),
      cpuSystemMs: number(readCount(this.dirs.cpuacct, 'cpuacct.usage_sys'), 1e6),
      peakMemoryBytes: number(readCount(this.dirs.memory, 'memory.max_usage_in_bytes'), 1),
    };
  }

  /** What the group's processes have used so far and hold now: CPU time and memory (null where the host does not count it). */
  async current(): Promise<{ cpuMs: number | null; memoryBytes: number | null }> {
    const number = (text: string) => (/^\d+$/.test(text.trim()) ? Number(text.trim()) : null);
    if (this.host.version === 'v2') {
      const usec = /^usage_usec (\d+)$/m.exec(readCount(this.dirs.cpuacct, 'cpu.stat'));
      return { cpuMs: usec ? Math.round(Number(usec[1]) / 1000) : null, memoryBytes: number(readCount(this.dirs.memory, 'memory.current')) };
    }
    const nanoseconds = number(readCount(this.dirs.cpuacct, 'cpuacct.usage'));
    return { cpuMs: nanoseconds === null ? null : Math.round(nanoseconds / 1e6), memoryBytes: number(readCount(this.dirs.memory, 'memory.usage_in_bytes')) };
  }

  /** Whether its processes can be frozen here (a freezer hierarchy, or v2's cgroup.freeze). */
  get freezes(): boolean {
    return this.dirs.freezer !== null;
  }

  /**
   * Stops every process of the group where it is, whatever it does (the cgroup freezer: no
   * signal it could see or catch), until thaw(). Resolves once all are stopped; false, and
   * thawed again, where that does not happen within FREEZE_WAIT_MS (a process in an
   * uninterruptible wait) or there is no freezer.
   */
  async freeze(): Promise<boolean> {
    const { freezer } = this.dirs;
    if (freezer === null) return false;
    const v2 = this.host.version === 'v2';
    await setFrozen(this.host.version, freezer, true);
    const frozen = () => (v2 ? /^frozen 1$/m.test(readCount(freezer, 'cgroup.events')) : readCount(freezer, 'freezer.state').trim() === 'FROZEN');
    for (const started = performance.now(); performance.now() - started < FREEZE_WAIT_MS; await sleep(1)) if (frozen()) return true;
    await this.thaw();
    return false;
  }

  /** Lets every process of the group go on where freeze() stopped it. */
  async thaw(): Promise<void> {
    if (this.dirs.freezer !== null) await setFrozen(this.host.version, this.dirs.freezer, false);
  }

  /** SIGKILLs every process still in the group: the backstop behind the PID namespace teardown. A frozen one is thawed to die. */
  async killAll(): Promise<void> {
    const procs = join(this.dirs.pids, 'cgroup.procs');
    for (let round = 0; round < 50; round++) {
      const pids = await listPids(procs);
      if (pids.length === 0) return;
      for (const pid of pids) signalQuietly(pid, 'SIGKILL');
      await this.thaw().catch(() => undefined);
      await sleep(10);
    }
  }

  async dispose(): Promise<void> {
    for (const dir of this.unique) await removeGroup(dir);
  }
}

/** The directories of a group, or of the parents of groups, each once (v2 has one for all controllers). */
function eachDirOnce(dirs: JobDirs): string[] {
  return [...new Set([dirs.memory, dirs.pids, ...[dirs.cpu, dirs.cpuacct, dirs.freezer].filter((dir) => dir !== null)])];
}

/** Freezes or thaws every process of the group at `dir` (v1's freezer.state, v2's cgroup.freeze). */
function setFrozen(version: CgroupVersion, dir: string, frozen: boolean): Promise<void> {
  return version === 'v2' ? writeFile(join(dir, 'cgroup.freeze'), frozen ? '1' : '0') : writeFile(join(dir, 'freezer.state'), frozen ? 'FROZEN' : 'THAWED');
}

async function listPids(procsFile: string): Promise<number[]> {
  const text = await readFile(procsFile, 'utf8').catch(() => '');
  return text.split('\n').filter(Boolean).map(Number);
}

async function removeGroup(dir: string): Promise<void> {
  // A group is busy for a moment after its last process exits.
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      await rmdir(dir);
      return;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return;
      if (code !== 'EBUSY') throw error;
      await sleep(5 * (attempt + 1));
    }
  }
}

/** Removes groups left by agent-runner processes that no longer exist (after a crash). */
export async function reapStaleCgroups(host: CgroupHost): Promise<number> {
  let reaped = 0;
  for (const parent of eachDirOnce(host.parents)) {
    const names = await readdir(parent, { withFileTypes: true }).catch(() => []);
    for (const entry of names) {
      if (!entry.isDirectory()) continue;
      const owner = Number(entry.name.split('-')[0]);
      if (!Number.isInteger(owner) || isAlive(owner)) continue;
      const dir = join(parent, entry.name);
      for (const pid of await listPids(join(dir, 'cgroup.procs'))) signalQuietly(pid, 'SIGKILL');
      // A frozen process dies only once thawed.
      if (parent === host.parents.freezer) await setFrozen(host.version, dir, false).catch(() => undefined);
      await removeGroup(dir).then(
        () => reaped++,
        () => undefined,
      );
    }
  }
  return reaped;
}

/**
 * A cgroup file's text ('' when absent). Read synchronously: the kernel makes these counts on
 * the read, with no disk behind them, in microseconds, where each async read through the thread
 * pool cost a job's answer about half a millisecond, four of them after every job (issue 30).
 */
function readCount(dir: string | null, file: string): string {
  if (dir === null) return '';
  try {
    return readFileSync(join(dir, file), 'utf8');
  } catch {
    return '';
  }
}
