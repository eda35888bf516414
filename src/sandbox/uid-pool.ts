import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { killUntilGone, processesOfUid } from './process-tree.js';

const SWEEP_TIMEOUT_MS = 2_000;

/**
 * Each running job gets its own unprivileged host uid (as isolate does with its boxes):
 * jobs cannot signal or read each other's processes through the host, and RLIMIT_NPROC,
 * which the kernel counts per uid, becomes a per-job process limit.
 *
 * The uids are shared by every agent-runner process on the host (a service, its worker, a
 * CLI run beside them): a process claims a uid host-wide with a lock file before it first
 * uses it, and keeps the claim while it lives. A claim whose process is gone (same pid and
 * start time no longer running) is taken over.
 */
export class UidPool {
  /** Uids this process holds a claim on and no job uses now. */
  private readonly free: number[] = [];
  private readonly waiting: Array<(uid: number) => void> = [];
  private readonly claimed = new Set<number>();
  /** Claimed, not yet used: whatever still runs as it is not ours (see ready()). */
  private readonly unswept = new Set<number>();

  constructor(
    private readonly base: number,
    private readonly size: number,
    private readonly lockDir: string,
  ) {
    mkdirSync(lockDir, { recursive: true, mode: 0o700 });
  }

  acquire(): Promise<number> {
    const uid = this.tryAcquire();
    if (uid !== undefined) return Promise.resolve(uid);
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** A uid if one is free now, without waiting. */
  tryAcquire(): number | undefined {
    return this.free.shift() ?? this.claimNew();
  }

  /**
   * Before a newly claimed uid's first job: a runner that died (its claim taken over here) may
   * have left processes running as it, dying or not; they would count against the job's
   * RLIMIT_NPROC (a fork failing with EAGAIN) and share its uid. They are killed first.
   */
  async ready(uid: number): Promise<void> {
    if (this.unswept.delete(uid)) await killUntilGone(() => processesOfUid(uid), SWEEP_TIMEOUT_MS);
  }

  release(uid: number): void {
    const next = this.waiting.shift();
    if (next) next(uid);
    else this.free.push(uid);
  }

  private claimNew(): number | undefined {
    for (let uid = this.base; uid < this.base + this.size; uid += 1) {
      if (!this.claimed.has(uid) && claim(join(this.lockDir, String(uid)))) {
        this.claimed.add(uid);
        this.unswept.add(uid);
        return uid;
      }
    }
    return undefined;
  }
}

/** Who we are, in a form that a recycled pid cannot fake: pid and start time. */
const SELF = identity(process.pid);

function claim(path: string): boolean {
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeSync(fd, SELF ?? String(process.pid));
      closeSync(fd);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    let holder: string;
    try {
      holder = readFileSync(path, 'utf8');
    } catch {
      continue;
    }
    if (holder === '' || identity(Number(holder.split(' ')[0])) === holder) return false;
    // The holder is gone: its claim is stale.
    try {
      unlinkSync(path);
    } catch {
      // Another process took it over first.
    }
  }
  return false;
}

/** "pid starttime" from /proc, or null when the process does not exist. */
function identity(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const startTime = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    return `${pid} ${startTime}`;
  } catch {
    return null;
  }
}
