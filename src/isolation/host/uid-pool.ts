import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { killUntilGone, processesOfUid, processOwners } from './process-tree.js';
import { processIdentity, SELF_IDENTITY } from '../../util/process-identity.js';
import { SandboxUnavailableError } from '../types.js';

const SWEEP_TIMEOUT_MS = 2_000;
/** How often resting uids are looked at, and how long one rests at most before it is free again whatever it holds. */
const REST_CHECK_MS = 250;
const REST_LIMIT_MS = 10_000;

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
  private readonly waiting: Array<{ resolve(uid: number): void; reject(error: Error): void }> = [];
  private readonly claimed = new Set<number>();
  /** Claimed, not yet used: whatever still runs as it is not ours (see ready()). */
  private readonly unswept = new Set<number>();
  /** Kept claimed, never handed out again (see setAside()). */
  private readonly setAsideUids = new Set<number>();
  /**
   * Given back by their jobs (see release()), with when: each is free once nothing is counted
   * against it, or after REST_LIMIT_MS. Taken before then only by a job when no other uid is.
   */
  private readonly resting = new Map<number, number>();
  private restCheck: NodeJS.Timeout | null = null;

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

  /**
   * A uid, at once or when a job of this pool gives one back. Rejects when none can come back
   * (this pool has none out, none resting): every other uid of the range is held by the host's
   * other runners or set aside, and waiting would be for ever.
   */
  acquire(): Promise<number> {
    const uid = this.tryAcquire();
    if (uid !== undefined) return Promise.resolve(uid);
    const starved = this.starved();
    if (starved) return Promise.reject(starved);
    // The rest check is what wakes it: it keeps the process alive while a job waits on it.
    this.restCheck?.ref();
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  /**
   * A uid if one is free now, without waiting. A resting one comes last, and only with
   * `orResting`: a job that would otherwise wait may take it, a sandbox started ahead may not.
   */
  tryAcquire(orResting = true): number | undefined {
    return this.free.shift() ?? this.claimNew() ?? (orResting ? this.takeResting() : undefined);
  }

  /**
   * Before a newly claimed uid's first job: a runner that died (its claim taken over here) may
   * have left processes running as it, dying or not; they would count against the job's
   * RLIMIT_NPROC (a fork failing with EAGAIN) and share its uid. They are killed first.
   */
  async ready(uid: number): Promise<void> {
    if (this.unswept.delete(uid)) await killUntilGone(() => processesOfUid(uid, this.span), SWEEP_TIMEOUT_MS);
  }

  /**
   * A uid back from its job. Its tasks may not all be gone: bwrap's launcher exits as soon as its
   * init reports the job's exit, and that init, orphaned, is reaped by the host's init, which on
   * some hosts does so seconds later. Its zombie counts against the uid's RLIMIT_NPROC till then,
   * and a run of short jobs on one uid had enough of them for the next one's fork to be refused.
   * So a uid rests, and comes back free once nothing is counted against it: looked at on a timer,
   * one scan of the host's processes for every uid resting, never on the way of a job.
   */
  release(uid: number): void {
    if (this.setAsideUids.has(uid)) return this.refuseWaitersIfStarved();
    this.resting.set(uid, Date.now());
    this.scheduleRestCheck();
  }

  /**
   * A uid the kernel refused a fork (EAGAIN) while nothing this host shows runs as it: something
   * unseen holds it (its RLIMIT_NPROC count is not ours to read), so no job of this pool gets it
   * again, and the claim, kept while this process lives, keeps the host's other runners off it.
   * Released already, it leaves the free list.
   */
  setAside(uid: number): void {
    this.setAsideUids.add(uid);
    this.resting.delete(uid);
    const index = this.free.indexOf(uid);
    if (index >= 0) this.free.splice(index, 1);
    this.refuseWaitersIfStarved();
  }

  /** Why no uid can come to a waiter (none of this pool's is out or resting, and none is left to claim), or null. */
  private starved(): SandboxUnavailableError | null {
    const out = this.claimed.size - this.free.length - this.setAsideUids.size - this.resting.size;
    if (out > 0 || this.resting.size > 0) return null;
    const setAside = this.setAsideUids.size > 0 ? ` (${this.setAsideUids.size} set aside here: the kernel refused them a fork)` : '';
    return new SandboxUnavailableError(
      `no ${this.span > 1 ? 'uid block' : 'uid'} of ${this.size} from ${this.base} is free: the host's other agent-runner processes hold them${setAside}`,
    );
  }

  /** Jobs waiting for a uid that none can come back to are refused, not left waiting for ever. */
  private refuseWaitersIfStarved(): void {
    const starved = this.starved();
    if (starved) for (const waiter of this.waiting.splice(0)) waiter.reject(starved);
  }

  private scheduleRestCheck(): void {
    if (this.restCheck !== null || this.resting.size === 0) return;
    this.restCheck = setTimeout(() => {
      this.restCheck = null;
      this.wakeRested();
    }, REST_CHECK_MS);
    // Nobody waiting, it holds no process open (a CLI's run ends while its uid rests).
    if (this.waiting.length === 0) this.restCheck.unref();
  }

  /** Frees the resting uids nothing is counted against any more (or that rested long enough); looks again later for the others. */
  private wakeRested(): void {
    // The uids the host's processes run as are few; a block spans 65,536: the range is asked of them.
    const counted = [...new Set(processOwners().map(({ realUid }) => realUid))];
    const now = Date.now();
    for (const [uid, since] of this.resting) {
      const held = counted.some((id) => id >= uid && id - uid < this.span);
      if (held && now - since < REST_LIMIT_MS) continue;
      this.resting.delete(uid);
      const next = this.waiting.shift();
      if (next) next.resolve(uid);
      else this.free.push(uid);
    }
    this.scheduleRestCheck();
  }

  /** The uid resting longest, when no other can be had: what is left of its last job may still be counted against it. */
  private takeResting(): number | undefined {
    const [uid] = this.resting.keys();
    if (uid !== undefined) this.resting.delete(uid);
    return uid;
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
