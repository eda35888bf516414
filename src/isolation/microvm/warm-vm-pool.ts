import { existsSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ownedName } from '../host/owned-dirs.js';
import { removeTree } from '../host/tree-removal.js';
import type { GuestImage } from './guest-image.js';
import type { WarmTakes } from '../types.js';
import { QemuVm, type VmShape } from './qemu-vm.js';

export interface WarmVmPoolOptions {
  image: GuestImage;
  shape: VmShape;
  /** Where snapshots are kept (shared by every process using the same cache). */
  snapshotsDir: string;
  /** Where this process's VMs keep their sockets and console logs. */
  vmsDir: string;
  size: number;
  bootTimeoutMs: number;
  /** Counted on each take: a VM was ready, or one was restored for the job. */
  takes: WarmTakes;
  /** Aborted when the backend is disposed of: a snapshot being taken stops, its VM killed. */
  signal?: AbortSignal;
}

/** A restore reads only device state; anything slower than this is a broken snapshot. */
const RESTORE_TIMEOUT_MS = 30_000;

/**
 * VMs restored from one snapshot and answering, kept ready so a job's VM is there when it asks.
 * They wait frozen (stopped CPUs, no cost) and run on when taken.
 * The snapshot is taken once per image and VM shape (a cold boot, the VM agent primed,
 * then saved) and kept in the cache dir. Each VM is handed out once; a job never gets a VM
 * another job touched, and the pool refills itself one restore at a time in the background.
 */
export class WarmVmPool {
  private readonly ready: QemuVm[] = [];
  private refilling: Promise<void> | null = null;
  private disposed = false;
  private failures = 0;

  private constructor(
    private readonly options: WarmVmPoolOptions,
    private readonly snapshot: { state: string; memoryFile: string },
  ) {}

  static async create(options: WarmVmPoolOptions): Promise<WarmVmPool> {
    const pool = new WarmVmPool(options, await warmSnapshot(options));
    pool.refill();
    return pool;
  }

  /**
   * A VM restored and answering: one kept ready, or else one restored now for this caller (a
   * restore is far cheaper than a boot, so the caller never waits for the refill, nor boots).
   */
  async take(): Promise<QemuVm> {
    let vm = this.ready.shift();
    while (vm && !vm.alive) vm = this.ready.shift();
    this.options.takes[vm ? 'hit' : 'miss'] += 1;
    this.refill();
    if (vm === undefined) return this.restore();
    try {
      await vm.thaw();
      return vm;
    } catch {
      // It died while kept: a restore of its own, as on a miss.
      await vm.destroy();
      return this.restore();
    }
  }

  /** A VM restored now from the pool's snapshot, `imageDisk` (a job's image, image-root-disk.ts) in its image slot. */
  restore(imageDisk?: string): Promise<QemuVm> {
    return QemuVm.start(
      join(this.options.vmsDir, ownedName()),
      { restore: { image: this.options.image, ...this.snapshot, ...(imageDisk && { imageDisk }) } },
      this.options.shape,
      RESTORE_TIMEOUT_MS,
    );
  }

  /** Resolves once the pool is full (for benchmarks and services that want the warm path). */
  async waitReady(): Promise<void> {
    while (this.ready.length < this.options.size && !this.disposed) {
      this.refill();
      await this.refilling;
    }
  }

  private refill(): void {
    if (this.refilling || this.disposed) return;
    this.refilling = (async () => {
      // Three failed restores in a row: the snapshot or the host is broken; the refill stops
      // (each job still tries its own restore, and says why it failed).
      while (!this.disposed && this.ready.length < this.options.size && this.failures < 3) {
        try {
          const vm = await this.restore();
          if (this.disposed) {
            await vm.destroy();
            continue;
          }
          // Kept frozen: a ready VM costs no CPU until it is taken.
          await vm.freeze().catch(async (error: unknown) => {
            await vm.destroy();
            throw error;
          });
          this.ready.push(vm);
          this.failures = 0;
        } catch {
          this.failures += 1;
        }
      }
    })().finally(() => (this.refilling = null));
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    await this.refilling;
    await Promise.all(this.ready.splice(0).map((vm) => vm.destroy()));
  }
}

/**
 * The snapshot for this image and shape: taken once (by a pool's first job, or `agent-runner
 * prepare`), then reused by every process.
 */
export async function warmSnapshot({
  image,
  shape,
  snapshotsDir,
  vmsDir,
  bootTimeoutMs,
  signal,
}: Omit<WarmVmPoolOptions, 'size' | 'takes'>): Promise<{ state: string; memoryFile: string }> {
  const name = `${image.id}-${Math.floor(shape.memoryBytes / (1024 * 1024))}m-${shape.vcpus}cpu-${shape.accel}`;
  const snapshotDir = join(snapshotsDir, name);
  const snapshot = { state: join(snapshotDir, 'state'), memoryFile: join(snapshotDir, 'memory') };
  if (existsSync(join(snapshotDir, 'complete'))) return snapshot;
  const building = join(snapshotsDir, `${name}.${ownedName()}`);
  await mkdir(building, { recursive: true, mode: 0o700 });
  try {
    const memoryFile = join(building, 'memory');
    const vm = await QemuVm.start(join(vmsDir, ownedName()), { boot: image, memoryFile }, shape, bootTimeoutMs, signal);
    try {
      await vm.channel.request({ op: 'prime' });
      await vm.saveTo(join(building, 'state'));
    } finally {
      await vm.destroy();
    }
    await writeFile(join(building, 'complete'), `${new Date().toISOString()}\n`);
    // Another process may have finished the same snapshot first (either is as good), or one
    // may have died half-way through it.
    if (!existsSync(join(snapshotDir, 'complete'))) await removeTree(snapshotDir);
    await rename(building, snapshotDir).catch(() => undefined);
  } finally {
    await removeTree(building);
  }
  return snapshot;
}
