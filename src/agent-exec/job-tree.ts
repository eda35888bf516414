import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { signalQuietly } from '../sandbox/process-tree.js';

/**
 * Which processes belong to a job, from /proc: a job's tree by parent links, and, for
 * processes that left the tree (setsid, double fork, nohup), the marker variable every job
 * process inherits. A process that clears its environment and leaves the tree escapes the
 * marker; the workspace sandbox's PID namespace catches those too.
 */

export const MARKER_VARIABLE = 'AGENT_EXEC_JOB_ID';

export function markerOf(jobId: string): string {
  return `${MARKER_VARIABLE}=${jobId}`;
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
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (state !== 'Z' && state !== 'X') entries.push({ pid, ppid: Number(ppid) });
    } catch {
      // It exited while we looked.
    }
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

export function signalAll(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) signalQuietly(pid, signal);
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
