import { CodedError, contractError } from '../contract/errors.js';
import type { Volume, VolumeCreateRequest } from '../contract/volumes.js';
import { describeVolume, type VolumeRecord, type VolumeStore } from '../volumes/volume-store.js';

/** A volume as its owner gets it: with the token its content API (E2B's /volumecontent) takes. */
export interface VolumeGranted {
  volume: Volume;
  token: string;
}

/** The sandboxes that mount volumes, as far as the volumes are concerned. */
export interface VolumeUsers {
  /** The running sandboxes that mount the volume `id`. */
  volumeUsers(id: string): string[];
}

/**
 * The volumes of the sandbox host: the store's, each told with the running sandboxes that mount
 * it, and refused deletion while any does unless forced. Every call is for an API key (undefined:
 * the service token, which sees every volume).
 */
export class SandboxVolumes {
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
    await this.store.delete(record.id);
    return volume;
  }

  private async granted(record: VolumeRecord): Promise<VolumeGranted> {
    return { volume: describeVolume(record, this.users.volumeUsers(record.id), await this.store.usedBytes(record.id)), token: record.token };
  }
}
