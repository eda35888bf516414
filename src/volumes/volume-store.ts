import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, rmdir, statfs } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { CodedError, contractError } from '../contract/errors.js';
import type { Volume } from '../contract/volumes.js';
import type { RunnerConfig } from '../config/schema.js';
import { makeDisk, mountDisk } from '../isolation/host/scratch-disk.js';
import { unmountLazily } from '../isolation/host/tmpfs.js';
import { writeFileAtomic } from '../util/atomic-write.js';

/** What is kept of a volume beside its disk (volume.json), the owner's and the service's. */
export interface VolumeRecord {
  id: string;
  name: string;
  sizeBytes: number;
  createdAt: string;
  /** The API key that owns it (service.apiKeys); absent: the service token. */
  apiKey?: string;
  /** E2B's volume token: what its content API takes (`Authorization: Bearer`). */
  token: string;
}

export interface VolumeStoreOptions {
  dir: string;
  defaultBytes: number;
  maxBytes: number;
  max: number;
}

/** The store's settings from the configuration (volumes.*; its dir under the state dir by default). */
export function volumeSettings(config: RunnerConfig): VolumeStoreOptions {
  const { dir, ...sizes } = config.volumes;
  return { dir: dir ?? join(config.stateDir, 'volumes'), ...sizes };
}

/** The uid and gid a sandbox's user has inside every sandbox: a volume's top directory is its. */
const SANDBOX_USER_IDS = '1000:1000';
const RECORD = 'volume.json';
const DISK = 'disk.img';
const MOUNT = 'mnt';

/**
 * The volumes of one service, each a directory of its own under `dir`: its record, and its disk,
 * an ext4 image of its size with a journal (a volume outlives the process that mounted it, a
 * kill -9 of it included), mounted on the host at `mnt` while anything uses it. The files on it
 * keep the ids they have inside a sandbox (1000 the user, 0 root): each sandbox sees them through
 * an idmapped mount of its own (image-root attach), whatever host uids it runs as. The host never
 * walks the tree sandboxes write; only its own three entries.
 */
export class VolumeStore {
  private readonly volumes = new Map<string, VolumeRecord>();
  /** Names being created now, by owner: a second create of one waits for nothing, it is refused. */
  private readonly reserved = new Set<string>();
  private readonly mounts = new Map<string, Promise<string>>();
  private readonly loaded: Promise<void>;

  constructor(private readonly options: VolumeStoreOptions) {
    this.loaded = this.load();
  }

  private async load(): Promise<void> {
    // Only its own directory is private: the state dir above must stay reachable by the sandboxes' uids.
    await mkdir(dirname(this.options.dir), { recursive: true });
    await mkdir(this.options.dir, { mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
    for (const id of await readdir(this.options.dir)) {
      const record = await readFile(join(this.options.dir, id, RECORD), 'utf8').then(
        (text) => JSON.parse(text) as VolumeRecord,
        () => null,
      );
      // A create that died before its record was written left a directory of no volume.
      if (record === null || record.id !== id) {
        await this.removeDir(id).catch(() => undefined);
        continue;
      }
      this.volumes.set(id, record);
      // Left mounted by a process of this service that died (kill -9): this one's to unmount now.
      const at = join(this.options.dir, id, MOUNT);
      if (await isMountPoint(at)) this.mounts.set(id, Promise.resolve(at));
    }
  }

  /** Makes an empty volume for `apiKey` (undefined: the service token). */
  async create(name: string, sizeBytes: number | undefined, apiKey: string | undefined): Promise<VolumeRecord> {
    await this.loaded;
    const bytes = sizeBytes ?? this.options.defaultBytes;
    if (bytes > this.options.maxBytes) {
      throw new CodedError(
        contractError('validation.invalid_request', `a volume may be at most ${Math.floor(this.options.maxBytes / 2 ** 20)} MiB, not ${Math.floor(bytes / 2 ** 20)}`),
      );
    }
    const owned = `${apiKey ?? ''}\0${name}`;
    if (this.reserved.has(owned) || this.ownedBy(apiKey).some((volume) => volume.name === name)) {
      throw new CodedError(contractError('volume.exists', `a volume named ${JSON.stringify(name)} exists already`, { name }));
    }
    if (this.volumes.size + this.reserved.size >= this.options.max) {
      throw new CodedError(contractError('volume.full', `this server holds ${this.options.max} volumes, the most it may; delete one first`, { max: this.options.max }));
    }
    this.reserved.add(owned);
    const id = `vol${randomBytes(16).toString('hex').slice(0, 21)}`;
    try {
      const dir = join(this.options.dir, id);
      await mkdir(dir, { mode: 0o700 });
      await makeDisk(join(dir, DISK), bytes, { journal: true, rootOwner: SANDBOX_USER_IDS });
      // Empty as its owner sees it: mkfs's lost+found (fsck makes it again should it need one) goes
      // while no sandbox has written anything there yet.
      await rmdir(join(await this.mounted(id), 'lost+found'));
      const record: VolumeRecord = {
        id,
        name,
        sizeBytes: bytes,
        createdAt: new Date().toISOString(),
        ...(apiKey !== undefined && { apiKey }),
        token: randomBytes(24).toString('base64url'),
      };
      // The record last: a volume is one once its record is there, whole.
      await writeFileAtomic(join(dir, RECORD), JSON.stringify(record), { mode: 0o600, syncDir: true });
      this.volumes.set(id, record);
      return record;
    } catch (error) {
      await this.unmount(id).catch(() => undefined);
      await this.removeDir(id).catch(() => undefined);
      throw error;
    } finally {
      this.reserved.delete(owned);
    }
  }

  /** The volumes `apiKey` owns; the service token (undefined) sees every one. */
  async list(apiKey: string | undefined): Promise<VolumeRecord[]> {
    await this.loaded;
    return apiKey === undefined ? [...this.volumes.values()] : this.ownedBy(apiKey);
  }

  /** By id or by the key's own name; volume.not_found for one the key does not own. */
  async find(idOrName: string, apiKey: string | undefined): Promise<VolumeRecord> {
    await this.loaded;
    const byId = this.volumes.get(idOrName);
    const found = byId && (apiKey === undefined || byId.apiKey === apiKey) ? byId : this.ownedBy(apiKey).find((volume) => volume.name === idOrName);
    if (!found) throw volumeNotFound(idOrName);
    return found;
  }

  /** By id alone, whoever owns it (a content request proves its token instead). */
  async byId(id: string): Promise<VolumeRecord | undefined> {
    await this.loaded;
    return this.volumes.get(id);
  }

  /**
   * Where its file system is mounted on the host, mounted now if it was not. A volume being
   * deleted is not found: its delete unmounts only the mounts it knows of.
   */
  async mountPath(id: string): Promise<string> {
    await this.loaded;
    if (!this.volumes.has(id)) throw volumeNotFound(id);
    return this.mounted(id);
  }

  private mounted(id: string): Promise<string> {
    let mounted = this.mounts.get(id);
    if (!mounted) {
      mounted = this.mount(id);
      this.mounts.set(id, mounted);
      mounted.catch(() => this.mounts.delete(id));
    }
    return mounted;
  }

  private async mount(id: string): Promise<string> {
    const dir = join(this.options.dir, id);
    const at = join(dir, MOUNT);
    await mkdir(at, { recursive: true, mode: 0o700 });
    await mountDisk(join(dir, DISK), at);
    return at;
  }

  /** What its files take now, where it is mounted; undefined otherwise. */
  async usedBytes(id: string): Promise<number | undefined> {
    const mounted = this.mounts.get(id);
    if (!mounted) return undefined;
    const at = await mounted.catch(() => null);
    if (at === null) return undefined;
    const { blocks, bfree, bsize } = await statfs(at);
    return (blocks - bfree) * bsize;
  }

  /**
   * Deletes it with its files. Sandboxes still mounting it (a forced delete) keep their mounts,
   * and the file system with them, until they end: its host mount is only detached here.
   */
  async delete(id: string): Promise<void> {
    await this.loaded;
    if (!this.volumes.delete(id)) return;
    await this.unmount(id);
    await this.removeDir(id);
  }

  /** Unmounts every volume (at the service's end): sandboxes that mount one have ended by then. */
  async close(): Promise<void> {
    await Promise.all([...this.mounts.keys()].map((id) => this.unmount(id)));
  }

  private async unmount(id: string): Promise<void> {
    const mounted = this.mounts.get(id);
    this.mounts.delete(id);
    const at = await (mounted ?? Promise.resolve(join(this.options.dir, id, MOUNT))).catch(() => null);
    if (at !== null && (await isMountPoint(at))) await unmountLazily(at);
  }

  /** Its own three entries: the mount point is empty once unmounted, never a tree of the sandboxes'. */
  private async removeDir(id: string): Promise<void> {
    const dir = join(this.options.dir, id);
    if (await isMountPoint(join(dir, MOUNT))) throw new Error(`volume ${id} is still mounted`);
    await rmdir(join(dir, MOUNT)).catch(() => undefined);
    await rm(join(dir, DISK), { force: true });
    await rm(join(dir, RECORD), { force: true });
    await rmdir(dir).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
  }

  private ownedBy(apiKey: string | undefined): VolumeRecord[] {
    return [...this.volumes.values()].filter((volume) => volume.apiKey === apiKey);
  }
}

/** The volume as the API shows it; `mountedBy` the running sandboxes that mount it. */
function volumeNotFound(idOrName: string): CodedError {
  return new CodedError(contractError('volume.not_found', `no volume ${JSON.stringify(idOrName)}`, { volume: idOrName }));
}

export function describeVolume(record: VolumeRecord, mountedBy: string[], usedBytes?: number): Volume {
  return {
    id: record.id,
    name: record.name,
    size_mb: Math.floor(record.sizeBytes / 2 ** 20),
    ...(usedBytes !== undefined && { used_mb: Math.ceil(usedBytes / 2 ** 20) }),
    created_at: record.createdAt,
    mounted_by: mountedBy,
    ...(record.apiKey !== undefined && { api_key: record.apiKey }),
  };
}

async function isMountPoint(path: string): Promise<boolean> {
  const mounts = await readFile('/proc/self/mounts', 'utf8').catch(() => '');
  return mounts.split('\n').some((line) => line.split(' ')[1]?.replace(/\\040/g, ' ') === path);
}
