import { randomUUID } from 'node:crypto';
import { Code, ConnectError } from '@connectrpc/connect';
import { agentCall } from './agent-errors.js';
import { toFilesystemEvent, type FilesystemEventInit } from './fs-events.js';
import type { EnvdCaller } from './target.js';

/**
 * Events a polling watcher keeps until it is read. A client that never polls should not grow the
 * worker without bound: past this the oldest events are dropped, the newest kept.
 */
const MAX_BUFFERED_EVENTS = 10_000;
/** Polling watchers one sandbox may hold: each buffers events in the worker until removed or the sandbox ends. */
const MAX_WATCHERS_PER_SANDBOX = 64;

interface Watcher {
  sandboxId: string;
  events: FilesystemEventInit[];
  detach(): void;
  unwatch(): Promise<void>;
}

/**
 * envd's non-streaming watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher): each buffers
 * the changes under its directory between polls. A watcher belongs to the sandbox that made it:
 * another sandbox's request for its id finds nothing.
 */
export class WatcherRegistry {
  private readonly watchers = new Map<string, Watcher>();

  async create(caller: EnvdCaller, path: string, recursive: boolean): Promise<string> {
    const { agent } = caller.target;
    const held = [...this.watchers.values()].filter((watcher) => watcher.sandboxId === caller.sandboxId).length;
    if (held >= MAX_WATCHERS_PER_SANDBOX) {
      throw new ConnectError(`sandbox ${caller.sandboxId} has ${held} watchers, the most it may; remove one first`, Code.ResourceExhausted);
    }
    // Counted from now, so that requests made together cannot pass the cap between them.
    const id = randomUUID();
    const watcher: Watcher = { sandboxId: caller.sandboxId, events: [], detach: () => {}, unwatch: async () => {} };
    this.watchers.set(id, watcher);
    let watch: number;
    try {
      ({ watch } = await agentCall(() => agent.request({ op: 'watch', path, recursive, user: caller.user })));
    } catch (error) {
      this.watchers.delete(id);
      throw error;
    }
    const { events } = watcher;
    watcher.detach = agent.onWatch(watch, (event) => {
      if (events.length >= MAX_BUFFERED_EVENTS) events.shift();
      events.push(toFilesystemEvent(event));
    }).detach;
    watcher.unwatch = () => agentCall(() => agent.request({ op: 'unwatch', watch })).then(() => {});
    return id;
  }

  /** The events since the last call, oldest first. */
  take(caller: EnvdCaller, id: string): FilesystemEventInit[] {
    const watcher = this.owned(caller, id);
    return watcher.events.splice(0, watcher.events.length);
  }

  async remove(caller: EnvdCaller, id: string): Promise<void> {
    const watcher = this.owned(caller, id);
    this.watchers.delete(id);
    watcher.detach();
    await watcher.unwatch();
  }

  /** Drops the watchers of a sandbox that ended (its agent, and the watches in it, are gone). */
  forgetSandbox(sandboxId: string): void {
    for (const [id, watcher] of this.watchers) {
      if (watcher.sandboxId !== sandboxId) continue;
      this.watchers.delete(id);
      watcher.detach();
    }
  }

  private owned(caller: EnvdCaller, id: string): Watcher {
    const watcher = this.watchers.get(id);
    if (!watcher || watcher.sandboxId !== caller.sandboxId) throw new ConnectError(`watcher '${id}' not found`, Code.NotFound);
    return watcher;
  }
}
