/**
 * Each running job gets its own unprivileged host uid (as isolate does with its boxes):
 * jobs cannot signal or read each other's processes through the host, and RLIMIT_NPROC,
 * which the kernel counts per uid, becomes a per-job process limit.
 */
export class UidPool {
  private readonly free: number[];
  private readonly waiting: Array<(uid: number) => void> = [];

  constructor(base: number, size: number) {
    this.free = Array.from({ length: size }, (_, index) => base + index);
  }

  acquire(): Promise<number> {
    const uid = this.free.shift();
    if (uid !== undefined) return Promise.resolve(uid);
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** A uid if one is free now, without waiting. */
  tryAcquire(): number | undefined {
    return this.free.shift();
  }

  release(uid: number): void {
    const next = this.waiting.shift();
    if (next) next(uid);
    else this.free.push(uid);
  }
}
