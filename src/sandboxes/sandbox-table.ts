import { CodedError, contractError } from '../contract/errors.js';
import type { LiveSandbox } from './live-sandbox.js';
import { sandboxNotFound } from './sandbox-host.js';
import type { KeptState } from './snapshot-store.js';

/**
 * The sandboxes of one process by id, as every part of Sandboxes sees them: those started (running,
 * or ended a while ago), the places of those being started, and the states kept of paused ones and
 * of snapshots.
 */
export class SandboxTable {
  readonly sandboxes = new Map<string, LiveSandbox>();
  /** The API key (undefined: the service token) of each sandbox being started. */
  readonly starting = new Map<object, string | undefined>();
  /**
   * The volumes of each sandbox being started, by its id, from its plan's mounts on: a delete of
   * one without force is refused as in use while it is bound in, not only once it runs.
   */
  readonly startingVolumes = new Map<string, readonly string[]>();
  /** Paused sandboxes' states and snapshots, on disk under the state dir, by id. */
  readonly kept = new Map<string, KeptState>();

  /** Running sandboxes: all, or those of one API key. */
  liveCount(apiKey?: string): number {
    let live = 0;
    for (const sandbox of this.sandboxes.values()) if (sandbox.running && (apiKey === undefined || sandbox.apiKey === apiKey)) live += 1;
    return live;
  }

  /** The sandboxes that mount the volume `volumeId`: those running and those being started. */
  volumeUsers(volumeId: string): string[] {
    const users = new Set<string>();
    for (const sandbox of this.sandboxes.values()) if (sandbox.running && sandbox.volumeIds.includes(volumeId)) users.add(sandbox.id);
    for (const [id, volumes] of this.startingVolumes) if (volumes.includes(volumeId)) users.add(id);
    return [...users];
  }

  find(id: string): LiveSandbox {
    const found = this.sandboxes.get(id);
    if (found) return found;
    if (this.pausedState(id)) throw new CodedError(contractError('sandbox.paused', `sandbox ${id} is paused: resume it first`));
    throw sandboxNotFound(id);
  }

  running(id: string): LiveSandbox {
    const sandbox = this.find(id);
    if (!sandbox.running) throw sandbox.endedError();
    return sandbox;
  }

  pausedState(id: string): KeptState | undefined {
    const state = this.kept.get(id);
    return state?.purpose === 'pause' ? state : undefined;
  }

  snapshots(): KeptState[] {
    return [...this.kept.values()].filter((state) => state.purpose === 'snapshot');
  }
}
