/**
 * Pre-started sandboxes by template key, each used for exactly one job. Only the most
 * recently used keys are kept warm, so an unusual template does not pin resources.
 */
export class WarmPool<T extends { discard(): void }> {
  private readonly idle = new Map<string, T[]>();
  /** Keys used lately, oldest first: only a template used twice is worth keeping warm. */
  private readonly seen = new Set<string>();

  constructor(
    private readonly perKey: number,
    private readonly maxKeys: number,
  ) {}

  /** Records a use; true when the key was used before (and so is likely to be used again). */
  noteUse(key: string): boolean {
    const repeated = this.seen.delete(key);
    this.seen.add(key);
    if (this.seen.size > this.maxKeys * 8) this.seen.delete(this.seen.values().next().value as string);
    return repeated;
  }

  take(key: string): T | undefined {
    const list = this.idle.get(key);
    const item = list?.shift();
    if (list) {
      // Re-insert: Map order is our recency order.
      this.idle.delete(key);
      this.idle.set(key, list);
    }
    return item;
  }

  /** True while the key has its place among the warm keys: taken empty, but not evicted. */
  keeps(key: string): boolean {
    return this.idle.has(key);
  }

  /** How many more this key wants. */
  shortfall(key: string): number {
    return this.perKey - (this.idle.get(key)?.length ?? 0);
  }

  add(key: string, item: T): void {
    const list = this.idle.get(key) ?? [];
    if (list.length >= this.perKey) {
      item.discard();
      return;
    }
    list.push(item);
    this.idle.delete(key);
    this.idle.set(key, list);
    while (this.idle.size > this.maxKeys) {
      const [oldest, evicted] = this.idle.entries().next().value as [string, T[]];
      this.idle.delete(oldest);
      for (const stale of evicted) stale.discard();
    }
  }

  remove(key: string, item: T): void {
    const list = this.idle.get(key);
    const index = list?.indexOf(item) ?? -1;
    if (index >= 0) list!.splice(index, 1);
  }

  drain(): void {
    for (const list of this.idle.values()) for (const item of list) item.discard();
    this.idle.clear();
  }
}
