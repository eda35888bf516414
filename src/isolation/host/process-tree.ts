import { readFileSync, readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The one place processes are found and killed. A sandbox launched by the service is its own
 * process group (signalGroup); a long-lived agent-exec job is found from /proc, by its tree of
 * parent links and, for processes that left the tree (setsid, double fork, nohup), by a marker
 * variable every job process inherits. Both are backed by the sandbox's PID namespace, which
 * takes every process of the job down with its init.
 */

/** Sends a signal, ignoring processes that are already gone. */
export function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // ESRCH: it exited first, which is what we wanted.
  }
}

/** Signals a whole process group (a launcher spawned detached is its own group). */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  signalQuietly(-pgid, signal);
}

export function signalAll(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) signalQuietly(pid, signal);
}

/** A process that has not exited: a zombie has (only its parent's wait is left), though signal 0 still reaches it. */
export function isAlive(pid: number): boolean {
  const state = stateOf(pid);
  return state !== null && state !== 'Z' && state !== 'X';
}

/** "state ppid ..." of /proc/<pid>/stat, or null once the process is gone. */
function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

function stateOf(pid: number): string | null {
  return statFields(pid)?.[0] ?? null;
}

interface ProcessEntry {
  pid: number;
  ppid: number;
}

/** Live processes; zombies are left out (they are dead, and signals cannot reach them). */
function liveProcesses(): ProcessEntry[] {
  const entries: ProcessEntry[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    // Null: it exited while we looked.
    const [state, ppid] = statFields(pid) ?? ['X'];
    if (state !== 'Z' && state !== 'X') entries.push({ pid, ppid: Number(ppid) });
  }
  return entries;
}

/** Every live descendant of `root`, deepest last. */
export function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const { pid, ppid } of liveProcesses()) {
    const siblings = children.get(ppid);
    if (siblings) siblings.push(pid);
    else children.set(ppid, [pid]);
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** A process's children, from the kernel's own list (one thread's, the main one's: a launcher forks from it). */
export function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch {
    return []; // it exited
  }
}

/** Live processes whose environment holds `marker` ("KEY=VALUE"), this one excepted. */
export function processesWithMarker(marker: string): number[] {
  const found: number[] = [];
  for (const { pid } of liveProcesses()) {
    if (pid === process.pid) continue;
    try {
      if (readFileSync(`/proc/${pid}/environ`).toString('latin1').split('\0').includes(marker)) found.push(pid);
    } catch {
      // Exited, or not ours to read.
    }
  }
  return found;
}

/** A process's command name (its comm), or '?' once it is gone. */
export function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/** "N tasks of threads-max M": the kernel's count of threads, which a fork past threads-max is refused for. */
export function hostTasks(): string {
  const read = (path: string) => {
    try {
      return readFileSync(path, 'utf8').trim();
    } catch {
      return '?';
    }
  };
  // loadavg's fourth field is "running/all" of the kernel's tasks.
  const all = read('/proc/loadavg').split(' ')[3]?.split('/')[1] ?? '?';
  return `${all} tasks of threads-max ${read('/proc/sys/kernel/threads-max')}`;
}

/** A process of the host, zombie or not, with what RLIMIT_NPROC counts of it: `threads`, against `realUid`. */
export interface ProcessOwner {
  pid: number;
  ppid: number;
  /** Z for a zombie, which counts until its parent reaps it. */
  state: string;
  threads: number;
  realUid: number;
  effectiveUid: number;
}

/**
 * Every process of the host, zombies included, with its uids read from its status: the owner of
 * /proc/PID says neither (a process that is not dumpable, after a change of uid, shows as root),
 * and RLIMIT_NPROC counts by real uid, every thread and every zombie until it is reaped.
 */
export function processOwners(): ProcessOwner[] {
  const found: ProcessOwner[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    let status: string;
    try {
      status = readFileSync(`/proc/${pid}/status`, 'utf8');
    } catch {
      continue; // it exited while we looked
    }
    const [realUid = -1, effectiveUid = -1] = statusField(status, 'Uid').split('\t').map(Number);
    found.push({
      pid,
      ppid: Number(statusField(status, 'PPid')),
      state: statusField(status, 'State').charAt(0),
      threads: Number(statusField(status, 'Threads')) || 1,
      realUid,
      effectiveUid,
    });
  }
  return found;
}

/** A "Key:\tvalue" line's value in /proc/PID/status ('' when absent). */
function statusField(status: string, key: string): string {
  // Never the first line (Name is): the newline keeps "Pid" from matching "PPid".
  const at = status.indexOf(`\n${key}:\t`);
  if (at < 0) return '';
  const end = status.indexOf('\n', at + 1);
  return status.slice(at + key.length + 3, end < 0 ? undefined : end);
}

/** Processes, zombies included, whose real or effective uid is `uid` or one of the `count` uids from it. */
export function uidHolders(uid: number, count = 1): ProcessOwner[] {
  const within = (id: number) => id >= uid && id - uid < count;
  return processOwners().filter(({ realUid, effectiveUid }) => within(realUid) || within(effectiveUid));
}

/** Live processes running as `uid`, or one of the `count` uids from it: those a signal still reaches. */
export function processesOfUid(uid: number, count = 1): number[] {
  return uidHolders(uid, count)
    .filter(({ state }) => state !== 'Z' && state !== 'X')
    .map(({ pid }) => pid);
}

/** SIGKILLs whatever `find` reports until it reports nothing (new forks included); false on timeout. */
export async function killUntilGone(find: () => number[], timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pids = find();
    if (pids.length === 0) return true;
    if (Date.now() > deadline) return false;
    signalAll(pids, 'SIGKILL');
    await sleep(20);
  }
}
