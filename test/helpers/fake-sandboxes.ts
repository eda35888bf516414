import { randomBytes } from 'node:crypto';
import { CodedError, contractError } from '../../src/contract/errors.js';
import { visibleTo } from '../../src/util/tenant.js';
import { posix } from 'node:path';
import type {
  Sandbox,
  SandboxCreateRequest,
  SandboxExecRequest,
  SandboxExecResult,
  SandboxFileWritten,
  SandboxForkRequest,
  SandboxForkResult,
  SandboxMetrics,
  SandboxPauseRequest,
  Snapshot,
  SnapshotCreateRequest,
  SandboxRunCodeRequest,
  SandboxRunCodeResult,
} from '../../src/contract/sandbox.js';

/** A 1x1 PNG, what the fake's cells draw. */
export const FAKE_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
import type { SandboxHost, SandboxPlace } from '../../src/sandboxes/sandbox-host.js';
import type { VolumeGranted } from '../../src/sandboxes/sandbox-volumes.js';
import type { Volume, VolumeCreateRequest } from '../../src/contract/volumes.js';

/**
 * A sandbox host that keeps sandboxes as records only (no sandbox, no agent): what the front
 * door's routes do with ids, states, timeouts and metadata, checked in-process. A command
 * "runs" by answering its own words on stdout (exit 0) and is recorded; files are kept in memory. The real host is
 * the worker process's (src/sandboxes/sandboxes.ts), tested with real sandboxes.
 */
export class FakeSandboxHost implements SandboxHost {
  readonly sandboxes = new Map<string, Sandbox>();
  readonly created: SandboxCreateRequest[] = [];
  readonly execs: Array<{ id: string; request: SandboxExecRequest }> = [];
  /** Each sandbox's files, by absolute path. */
  readonly files = new Map<string, Map<string, Buffer>>();

  constructor(private readonly fileLimit = 1024 * 1024) {}

  async create(request: SandboxCreateRequest, apiKey?: string): Promise<Sandbox> {
    if (request.template !== undefined && request.template !== 'base') {
      throw new CodedError(contractError('template.not_found', `no template ${JSON.stringify(request.template)}`));
    }
    this.created.push(request);
    const now = Date.now();
    const sandbox: Sandbox = {
      id: randomBytes(12).toString('hex'),
      template: request.template ?? 'base',
      backend: 'local_process',
      state: 'running',
      // Distinct start times keep the listing's order the order of creation.
      started_at: new Date(now + this.sandboxes.size).toISOString(),
      end_at: new Date(now + (request.timeout_seconds ?? 300) * 1000).toISOString(),
      metadata: request.metadata ?? {},
      cpu_count: 1,
      memory_mb: 1024,
      disk_size_mb: 1024,
      internet_access: request.allow_internet_access ?? false,
      agent_version: 'fake',
      ...(apiKey !== undefined && { api_key: apiKey }),
    };
    this.sandboxes.set(sandbox.id, sandbox);
    return { ...sandbox, ...(request.secure ? { envd_access_token: 'fake-token' } : {}) };
  }

  async list(): Promise<Sandbox[]> {
    return [...this.sandboxes.values()];
  }

  async describe(id: string): Promise<Sandbox> {
    return this.find(id);
  }

  async setTimeout(id: string, timeoutSeconds: number): Promise<Sandbox> {
    const sandbox = this.find(id);
    sandbox.end_at = new Date(Date.now() + timeoutSeconds * 1000).toISOString();
    return sandbox;
  }

  async kill(id: string): Promise<Sandbox> {
    const sandbox = this.find(id);
    sandbox.state = 'ended';
    sandbox.ended_reason = 'killed';
    return sandbox;
  }

  async connect(id: string, timeoutSeconds?: number): Promise<Sandbox> {
    const sandbox = this.find(id);
    if (timeoutSeconds !== undefined && Date.now() + timeoutSeconds * 1000 > Date.parse(sandbox.end_at)) await this.setTimeout(id, timeoutSeconds);
    return { ...sandbox, envd_access_token: 'fake-token' };
  }

  async exec(id: string, request: SandboxExecRequest): Promise<SandboxExecResult> {
    this.running(id);
    this.execs.push({ id, request });
    const words = 'argv' in request ? request.argv.join(' ') : request.cmd;
    return { sandbox_id: id, stdout: `${words}\n`, stderr: '', exit_code: 0, timed_out: false, duration_ms: 0 };
  }

  /** A cell "runs" by showing its code as the main result, and a png when it mentions a plot. */
  readonly cells: Array<{ id: string; request: SandboxRunCodeRequest }> = [];

  async runCode(id: string, request: SandboxRunCodeRequest): Promise<SandboxRunCodeResult> {
    this.running(id);
    this.cells.push({ id, request });
    const results: SandboxRunCodeResult['results'] = [{ is_main_result: true, text: request.code }];
    if (request.code.includes('plot')) results.unshift({ is_main_result: false, text: '<Figure>', png: FAKE_PNG, chart: { type: 'line', title: null, elements: [] } });
    return { sandbox_id: id, stdout: '', stderr: '', results, error: null, execution_count: this.cells.length, timed_out: false, duration_ms: 0 };
  }

  async writeFile(id: string, path: string, content: Buffer): Promise<SandboxFileWritten> {
    this.running(id);
    if (content.length > this.fileLimit) throw new CodedError(contractError('sandbox.file_too_large', `${path} is over ${this.fileLimit} bytes`));
    const absolute = posix.resolve('/home/user', path);
    let files = this.files.get(id);
    if (!files) this.files.set(id, (files = new Map()));
    files.set(absolute, Buffer.from(content));
    return { path: absolute, bytes: content.length };
  }

  async readFile(id: string, path: string): Promise<Buffer> {
    this.running(id);
    const content = this.files.get(id)?.get(posix.resolve('/home/user', path));
    if (!content) throw new CodedError(contractError('sandbox.file_not_found', `${path}: no such file`, { path }));
    return content;
  }

  maxFileBytes(): number {
    return this.fileLimit;
  }

  async metrics(id: string): Promise<SandboxMetrics> {
    this.find(id);
    return {
      timestamp: new Date().toISOString(),
      cpu_count: 1,
      cpu_used_pct: 12.5,
      mem_used_bytes: 1 << 20,
      mem_total_bytes: 1 << 30,
      disk_used_bytes: 4096,
      disk_total_bytes: 1 << 30,
    };
  }

  syncSocket(): string | null {
    return null;
  }

  envdSocket(): string | null {
    return null;
  }

  /** Sandboxes said to live behind another front door (the distributed mode), by id. */
  readonly elsewhere = new Map<string, string>();
  /** Volumes by id, the HTTP routes' view of them (the store itself is tested against the real one). */
  readonly volumes = new Map<string, { volume: Volume; token: string }>();

  async createVolume(request: VolumeCreateRequest, apiKey?: string): Promise<VolumeGranted> {
    if ([...this.volumes.values()].some(({ volume }) => volume.name === request.name && volume.api_key === apiKey)) {
      throw new CodedError(contractError('volume.exists', `a volume named ${request.name} exists already`));
    }
    const id = `vol${randomBytes(16).toString('hex').slice(0, 21)}`;
    const volume: Volume = {
      id,
      name: request.name,
      size_mb: request.size_mb ?? 1024,
      created_at: new Date().toISOString(),
      mounted_by: [],
      ...(apiKey !== undefined && { api_key: apiKey }),
    };
    const granted = { volume, token: randomBytes(8).toString('hex') };
    this.volumes.set(id, granted);
    return granted;
  }

  async listVolumes(apiKey?: string): Promise<Volume[]> {
    return [...this.volumes.values()].map(({ volume }) => volume).filter((volume) => apiKey === undefined || volume.api_key === apiKey);
  }

  async describeVolume(idOrName: string, apiKey?: string): Promise<VolumeGranted> {
    const found = [...this.volumes.values()].find(({ volume }) => (volume.id === idOrName || volume.name === idOrName) && (apiKey === undefined || volume.api_key === apiKey));
    if (!found) throw new CodedError(contractError('volume.not_found', `no volume ${idOrName}`));
    return found;
  }

  async deleteVolume(idOrName: string, apiKey?: string): Promise<Volume> {
    const { volume } = await this.describeVolume(idOrName, apiKey);
    this.volumes.delete(volume.id);
    return volume;
  }

  /** Every id placeOf was asked about, in order. */
  readonly placesAsked: string[] = [];

  async placeOf(id: string): Promise<SandboxPlace> {
    this.placesAsked.push(id);
    const address = this.elsewhere.get(id);
    return address === undefined ? { here: true } : { address };
  }

  /** Snapshots by id; a create whose template names one starts from its files. */
  readonly snapshots = new Map<string, { snapshot: Snapshot; files: Map<string, Buffer> }>();
  /** What each pause asked for, in order. */
  readonly pauses: Array<{ id: string; request: SandboxPauseRequest | undefined }> = [];

  /** Pauses as a backend that keeps files only: `keep_memory: true` is refused. */
  async pause(id: string, request?: SandboxPauseRequest): Promise<Sandbox> {
    const sandbox = this.running(id);
    this.pauses.push({ id, request });
    if (request?.keep_memory === true) throw new CodedError(contractError('sandbox.pause_unsupported', 'the fake keeps files only'));
    Object.assign(sandbox, { state: 'paused', paused_at: new Date().toISOString(), kept: 'files', agent_version: null });
    return sandbox;
  }

  async resume(id: string, timeoutSeconds?: number): Promise<{ sandbox: Sandbox; resumed: boolean }> {
    const sandbox = this.find(id);
    if (sandbox.state !== 'paused') return { sandbox: await this.connect(id, timeoutSeconds), resumed: false };
    sandbox.state = 'running';
    delete sandbox.paused_at;
    delete sandbox.kept;
    sandbox.end_at = new Date(Date.now() + (timeoutSeconds ?? 300) * 1000).toISOString();
    return { sandbox: { ...sandbox, envd_access_token: 'fake-token' }, resumed: true };
  }

  async fork(id: string, request?: SandboxForkRequest): Promise<SandboxForkResult> {
    const parent = this.running(id);
    const forks = [];
    for (let copy = 0; copy < (request?.count ?? 1); copy += 1) {
      const sandbox = await this.create({ template: 'base', metadata: parent.metadata, secure: true, timeout_seconds: request?.timeout_seconds ?? 300 }, parent.api_key);
      this.files.set(sandbox.id, new Map(this.files.get(id)));
      forks.push({ sandbox });
    }
    return { kept: 'files', forks };
  }

  async snapshot(id: string, request?: SnapshotCreateRequest): Promise<Snapshot> {
    const sandbox = this.running(id);
    const snapshot: Snapshot = {
      id: randomBytes(12).toString('hex'),
      name: request?.name ?? null,
      sandbox_id: id,
      template: sandbox.template,
      backend: sandbox.backend,
      kept: 'files',
      bytes: 0,
      created_at: new Date(Date.now() + this.snapshots.size).toISOString(),
      ...(sandbox.api_key !== undefined && { api_key: sandbox.api_key }),
    };
    this.snapshots.set(snapshot.id, { snapshot, files: new Map(this.files.get(id)) });
    return snapshot;
  }

  async listSnapshots(filter: { sandbox_id?: string; name?: string } = {}): Promise<Snapshot[]> {
    return [...this.snapshots.values()]
      .map(({ snapshot }) => snapshot)
      .filter(
        (snapshot) =>
          (filter.sandbox_id === undefined || snapshot.sandbox_id === filter.sandbox_id) &&
          (filter.name === undefined || snapshot.name === filter.name || snapshot.id === filter.name),
      );
  }

  /** As kept-sandboxes.ts: by id one the key sees, by name the key's own. */
  async deleteSnapshot(idOrName: string, apiKey?: string): Promise<Snapshot> {
    const found = [...this.snapshots.values()].find(
      ({ snapshot }) => visibleTo(apiKey, snapshot.api_key) && (snapshot.id === idOrName || (snapshot.name === idOrName && snapshot.api_key === apiKey)),
    );
    if (!found) throw new CodedError(contractError('snapshot.not_found', `no snapshot ${JSON.stringify(idOrName)}`));
    this.snapshots.delete(found.snapshot.id);
    return found.snapshot;
  }

  private running(id: string): Sandbox {
    const sandbox = this.find(id);
    if (sandbox.state === 'ended') throw new CodedError(contractError('sandbox.ended', `sandbox ${id} has ended: ${sandbox.ended_reason}`));
    if (sandbox.state === 'paused') throw new CodedError(contractError('sandbox.paused', `sandbox ${id} is paused`));
    return sandbox;
  }

  private find(id: string): Sandbox {
    const sandbox = this.sandboxes.get(id);
    if (!sandbox) throw new CodedError(contractError('sandbox.not_found', `no sandbox ${JSON.stringify(id)}`));
    return sandbox;
  }
}
