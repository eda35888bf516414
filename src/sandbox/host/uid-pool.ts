import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { killUntilGone, processesOfUid } from './process-tree.js';
import { processIdentity, SELF_IDENTITY } from '../../util/process-identity.js';

const SWEEP_TIMEOUT_MS = 2_000;

/**
 * Each running job gets its own unprivileged host uid (as isolate does with its boxes):
 * jobs cannot signal or read each other's processes through the host, and RLIMIT_NPROC,
 * which the kernel counts per uid, becomes a per-job process limit.
 *
 * The uids are shared by every agent-runner process on the host (a service, its worker, a
 * CLI run beside them): a process claims a uid host-wide with a lock file before it first
 * uses it (see claim()), and keeps the claim while it lives. A claim whose process is gone
 * (same pid and start time no longer running) no longer counts.
 */
export class UidPool {
  /** Uids this process holds a claim on and no job uses now. */
  private readonly free: number[] = [];
  private readonly waiting: Array<(uid: number) => void> = [];
  private readonly claimed = new Set<number>();
  /** Claimed, not yet used: whatever still runs as it is not ours (see ready()). */
  private readonly unswept = new Set<number>();

  /**
   * `size` claims of `span` uids each (the first names the claim): one uid for a sandbox's user
   * or its root, a block of 65,536 for one on an image (util/id-ranges.ts).
   */
  constructor(
    private readonly base: number,
    private readonly size: number,
    private readonly lockDir: string,
    private readonly span = 1,
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
    if (this.unswept.delete(uid)) await killUntilGone(() => processesOfUid(uid, this.span), SWEEP_TIMEOUT_MS);
  }

  release(uid: number): void {
    const next = this.waiting.shift();
    if (next) next(uid);
    else this.free.push(uid);
  }

  private claimNew(): number | undefined {
    const held = liveClaims(this.lockDir);
    for (let uid = this.base; uid < this.base + this.size * this.span; uid += this.span) {
      if (!this.claimed.has(uid) && !held.has(uid) && claim(this.lockDir, uid)) {
        this.claimed.add(uid);
        this.unswept.add(uid);
        return uid;
      }
    }
    return undefined;
  }
}

/**
 * A claim is a file `<uid>.<pid>.<start time>`, one per claiming process, which no other
 * process removes while its process lives. A process holds a uid when, after writing its own
 * claim, it sees no other live claim on it: of two claimants the later writer sees the
 * earlier's (both may see each other and both step back; never both keep it). Taking a stale
 * claim over by unlinking and rewriting one shared `<uid>` file was not atomic: two processes
 * that read the same dead holder both won (the second unlinked the first's fresh claim), ran
 * jobs as one uid, and each job's processes counted against the other's RLIMIT_NPROC, so
 * bwrap's clone failed with EAGAIN.
 */
function claim(lockDir: string, uid: number): boolean {
  const ownName = `${uid}.${SELF_IDENTITY}`;
  const own = join(lockDir, ownName);
  closeSync(openSync(own, 'wx', 0o600));
  if (!liveClaims(lockDir, ownName).has(uid)) return true;
  unlinkSync(own);
  return false;
}

/**
 * The uids live processes claim, this one's included (another pool of this process, a second
 * runtime, holds its claims as any process does), but for the claim file `except`. A dead
 * process's claims are removed (their names are its own, so no live claim goes with them). A
 * `<uid>` file of an older agent-runner still running ("pid start time" inside) counts too; it
 * is left for its own kind to take over.
 */
function liveClaims(lockDir: string, except?: string): Set<number> {
  const held = new Set<number>();
  for (const name of readdirSync(lockDir)) {
    if (name === except) continue;
    const [uid, pid, startTime] = name.split('.');
    if (pid === undefined) {
      if (isLegacyClaimLive(join(lockDir, name))) held.add(Number(uid));
      continue;
    }
    const holder = `${pid}.${startTime}`;
    if (holder === SELF_IDENTITY || processIdentity(Number(pid)) === holder) held.add(Number(uid));
    else unlinkQuietly(join(lockDir, name));
  }
  return held;
}

function isLegacyClaimLive(path: string): boolean {
  try {
    const [pid, startTime] = readFileSync(path, 'utf8').split(' ');
    return processIdentity(Number(pid)) === `${pid}.${startTime}`;
  } catch {
    return false;
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Another process removed it first.
  }
}
