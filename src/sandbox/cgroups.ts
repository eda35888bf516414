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
  /** Directory under which this process creates its job groups, per controller for v1. */
  parents: { memory: string; pids: string };
}

export interface CgroupLimits {
  memoryBytes: number | null;
  maxProcesses: number;
}

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
    try {
      await mkdir(parent, { recursive: true });
      await writeFile(join(ROOT, 'cgroup.subtree_control'), '+memory +pids');
      await writeFile(join(parent, 'cgroup.subtree_control'), '+memory +pids');
      return { version: 'v2', parents: { memory: parent, pids: parent } };
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
    return { version: 'v1', parents: { memory, pids } };
  } catch {
    return null;
  }
}

let sequence = 0;

export class JobCgroup {
  private constructor(
    private readonly host: CgroupHost,
    readonly dirs: readonly string[],
  ) {}

  /**
   * Creates the job's groups with their limits. `ownerUid` may then move itself in, so the
   * launcher can join before it execs into the sandbox without staying root.
   */
  static async create(host: CgroupHost, limits: CgroupLimits, ownerUid: number | null): Promise<JobCgroup> {
    const name = `${process.pid}-${++sequence}-${Date.now().toString(36)}`;
    const dirs = host.version === 'v2' ? [join(host.parents.memory, name)] : [join(host.parents.memory, name), join(host.parents.pids, name)];
    for (const dir of dirs) await mkdir(dir);
    const group = new JobCgroup(host, dirs);
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
    const [memoryDir, pidsDir = memoryDir] = this.dirs as [string, string?];
    await writeFile(join(pidsDir, 'pids.max'), String(limits.maxProcesses));
    if (limits.memoryBytes === null) return;
    if (this.host.version === 'v2') {
      await writeFile(join(memoryDir, 'memory.max'), String(limits.memoryBytes));
      await writeFile(join(memoryDir, 'memory.swap.max'), '0').catch(() => undefined);
      return;
    }
    await writeFile(join(memoryDir, 'memory.limit_in_bytes'), String(limits.memoryBytes));
    // memsw exists only with swap accounting; without it there is no swap to bound.
    await writeFile(join(memoryDir, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes)).catch(() => undefined);
  }

  procsFiles(): string[] {
    return this.dirs.map((dir) => join(dir, 'cgroup.procs'));
  }

  async oomKilled(): Promise<boolean> {
    const memoryDir = this.dirs[0]!;
    const file = this.host.version === 'v2' ? 'memory.events' : 'memory.oom_control';
    const text = await readFile(join(memoryDir, file), 'utf8').catch(() => '');
    const match = /^oom_kill (\d+)$/m.exec(text);
    return match !== null && Number(match[1]) > 0;
  }

  /** SIGKILLs every process still in the group: the backstop behind the PID namespace teardown. */
  async killAll(): Promise<void> {
    const procs = this.procsFiles().at(-1)!;
    for (let round = 0; round < 50; round++) {
      const pids = await listPids(procs);
      if (pids.length === 0) return;
      for (const pid of pids) signalQuietly(pid, 'SIGKILL');
      await sleep(10);
    }
  }

  async dispose(): Promise<void> {
    for (const dir of this.dirs) await removeGroup(dir);
  }
}

async function listPids(procsFile: string): Promise<number[]> {
  const text = await readFile(procsFile, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map(Number);
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
  for (const parent of new Set([host.parents.memory, host.parents.pids])) {
    const names = await readdir(parent, { withFileTypes: true }).catch(() => []);
    for (const entry of names) {
      if (!entry.isDirectory()) continue;
      const owner = Number(entry.name.split('-')[0]);
      if (!Number.isInteger(owner) || isAlive(owner)) continue;
      const dir = join(parent, entry.name);
      for (const pid of await listPids(join(dir, 'cgroup.procs'))) signalQuietly(pid, 'SIGKILL');
      await removeGroup(dir).then(
        () => reaped++,
        () => undefined,
      );
    }
  }
  return reaped;
}

