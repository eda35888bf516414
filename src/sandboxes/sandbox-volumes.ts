import { CodedError, contractError } from '../contract/errors.js';
import type { Volume, VolumeCreateRequest } from '../contract/volumes.js';
import { describeVolume, type VolumeRecord, type VolumeStore } from '../volumes/volume-store.js';
import type { SandboxCreateRequest } from '../contract/sandbox.js';
import type { SandboxAgentPort } from './agent-port.js';
import type { LiveSandbox } from './live-sandbox.js';

/** A volume as its owner gets it: with the token its content API (E2B's /volumecontent) takes. */
export interface VolumeGranted {
  volume: Volume;
  token: string;
}

/** The sandboxes that mount volumes, as far as the volumes are concerned. */
export interface VolumeUsers {
  /** The running sandboxes that mount the volume `id`. */
  volumeUsers(id: string): string[];
  /** A sandbox of the host's own (Sandboxes.startHelper). */
  startHelper(request: SandboxCreateRequest): Promise<LiveSandbox>;
}

/** Where a volume is mounted in the sandbox that serves its files (E2B's volume content API). */
export const VOLUME_CONTENT_ROOT = '/volume';
/** A volume's helper sandbox unused this long ends; the next request starts another. */
const HELPER_IDLE_MS = 30_000;

interface ContentHelper {
  sandbox: Promise<LiveSandbox>;
  /** Requests using it now: it is not ended under them. */
  busy: number;
  idle?: NodeJS.Timeout;
}

/**
 * The volumes of the sandbox host: the store's, each told with the running sandboxes that mount
 * it, and refused deletion while any does unless forced. Every call is for an API key (undefined:
 * the service token, which sees every volume).
 */
export class SandboxVolumes {
  private readonly helpers = new Map<string, ContentHelper>();

  constructor(
    private readonly store: VolumeStore,
    private readonly users: VolumeUsers,
  ) {}

  async create(request: VolumeCreateRequest, apiKey?: string): Promise<VolumeGranted> {
    const record = await this.store.create(request.name, request.size_mb === undefined ? undefined : request.size_mb * 2 ** 20, apiKey);
    return this.granted(record);
  }

  async list(apiKey?: string): Promise<Volume[]> {
    const records = await this.store.list(apiKey);
    return Promise.all(records.map(async (record) => (await this.granted(record)).volume));
  }

  async describe(idOrName: string, apiKey?: string): Promise<VolumeGranted> {
    return this.granted(await this.store.find(idOrName, apiKey));
  }

  async delete(idOrName: string, apiKey?: string, force = false): Promise<Volume> {
    const record = await this.store.find(idOrName, apiKey);
    const { volume } = await this.granted(record);
    if (volume.mounted_by.length > 0 && !force) {
      throw new CodedError(
        contractError('volume.in_use', `volume ${record.name} is mounted by ${volume.mounted_by.join(', ')}: kill those sandboxes first, or delete it with force`, {
          mounted_by: volume.mounted_by,
        }),
      );
    }
    await this.endHelper(record.id);
    await this.store.delete(record.id);
    return volume;
  }

  /** The token of volume `id`'s content API; undefined when there is no such volume. */
  async tokenOf(id: string): Promise<string | undefined> {
    return (await this.store.byId(id))?.token;
  }

  /**
   * Runs `use` with the agent of a sandbox of the host's own that mounts volume `id` at
   * VOLUME_CONTENT_ROOT (started at the first request, ended once idle): the volume's files are
   * only ever touched from inside a sandbox, as its user (or root), never by the host walking a
   * tree that sandboxes write.
   */
  async withContent<T>(id: string, use: (agent: SandboxAgentPort) => Promise<T>): Promise<T> {
    const helper = this.helperOf(id);
    clearTimeout(helper.idle);
    helper.busy += 1;
    try {
      const sandbox = await helper.sandbox;
      // Ended by itself (its lifetime): the next request starts another.
      if (!sandbox.running) {
        if (this.helpers.get(id) === helper) this.helpers.delete(id);
        return await this.withContent(id, use);
      }
      return await use(sandbox.agent);
    } finally {
      helper.busy -= 1;
      if (helper.busy === 0 && this.helpers.get(id) === helper) helper.idle = setTimeout(() => void this.endHelper(id), HELPER_IDLE_MS).unref();
    }
  }

  private helperOf(id: string): ContentHelper {
    const known = this.helpers.get(id);
    if (known) return known;
    const helper: ContentHelper = {
      sandbox: this.users.startHelper({ template: 'base', backend: { kind: 'local_process' }, volume_mounts: [{ volume: id, path: VOLUME_CONTENT_ROOT }] }),
      busy: 0,
    };
    // One that could not start is not kept: the next request tries again.
    helper.sandbox.catch(() => this.helpers.get(id) === helper && this.helpers.delete(id));
    this.helpers.set(id, helper);
    return helper;
  }

  private async endHelper(id: string): Promise<void> {
    const helper = this.helpers.get(id);
    if (!helper) return;
    this.helpers.delete(id);
    clearTimeout(helper.idle);
    const sandbox = await helper.sandbox.catch(() => null);
    await sandbox?.end('its volume is no longer used');
  }

  private async granted(record: VolumeRecord): Promise<VolumeGranted> {
    return { volume: describeVolume(record, this.users.volumeUsers(record.id), await this.store.usedBytes(record.id)), token: record.token };
  }
}
