import type { Socket } from 'node:net';
import { SandboxListSchema, type Sandbox } from '../contract/sandbox.js';
import { validate } from '../contract/validate.js';
import { FORWARDED_HEADER } from '../contract/forwarded.js';
import { keyFullError, type SandboxHost, type SandboxPlace } from '../sandboxes/sandbox-host.js';
import type { Owners } from './owners.js';

/** A front door that does not answer a listing this soon is left out of it (its sandboxes are lost with it). */
const LIST_DEADLINE_MS = 3000;

/**
 * The sandboxes of the distributed mode, as one front door sees them. A sandbox lives in the
 * worker process of the front door that made it, which records itself as its owner; a request for
 * a sandbox another front door holds is forwarded there whole, at the HTTP level
 * (http/envd-proxy.ts), so every route and envd's streams reach it unchanged. A listing asks
 * every front door that holds sandboxes for its own.
 */
export class ClusterSandboxes implements SandboxHost {
  constructor(
    private readonly local: SandboxHost,
    private readonly owners: Owners,
    /** This front door's address as the others reach it; known once it listens. */
    private readonly self: () => string,
    /** The service token, which the other front doors take too. */
    private readonly token: string | null,
    /** Each API key's cap on the sandboxes it holds running (service.apiKeys), by name. */
    private readonly keyCaps: Readonly<Record<string, number | null>> = {},
  ) {}

  async list(scope: 'everywhere' | 'here' = 'everywhere'): Promise<Sandbox[]> {
    const here = this.local.list();
    if (scope === 'here') return here;
    const others = (await this.owners.addresses()).filter((address) => address !== this.self());
    const lists = await Promise.all([here, ...others.map((address) => this.listOf(address))]);
    return lists.flat();
  }

  /** Another front door's own sandboxes; none when it does not answer (it is gone, and they with it). */
  private async listOf(address: string): Promise<Sandbox[]> {
    const headers: Record<string, string> = { [FORWARDED_HEADER]: '1', ...(this.token === null ? {} : { authorization: `Bearer ${this.token}` }) };
    try {
      const response = await fetch(new URL('/v1/sandboxes', address), { headers, signal: AbortSignal.timeout(LIST_DEADLINE_MS) });
      if (!response.ok) return [];
      const listed = validate(SandboxListSchema, await response.json());
      return listed.ok ? listed.value.sandboxes : [];
    } catch {
      return [];
    }
  }

  /**
   * A key's cap counts its sandboxes on every front door: looked at before this one starts another
   * (two creates at the same instant on two front doors may both pass it).
   */
  async create(request: Parameters<SandboxHost['create']>[0], apiKey?: string) {
    const cap = apiKey === undefined ? null : (this.keyCaps[apiKey] ?? null);
    if (apiKey !== undefined && cap !== null) {
      const held = (await this.list()).filter((sandbox) => sandbox.api_key === apiKey && sandbox.state === 'running').length;
      if (held >= cap) throw keyFullError(apiKey, cap);
    }
    const sandbox = await this.local.create(request, apiKey);
    try {
      await this.owners.record(sandbox.id, this.self());
    } catch (error) {
      // Unrecorded, it would answer here only: kill it rather than hand out a half-reachable id.
      await this.local.kill(sandbox.id).catch(() => undefined);
      throw error;
    }
    return sandbox;
  }

  /** Copies live on this front door's worker, as their parent does; each is recorded as its own. */
  async fork(id: string, request?: Parameters<SandboxHost['fork']>[1]) {
    const result = await this.local.fork(id, request);
    for (const fork of result.forks) if (fork.sandbox) await this.owners.record(fork.sandbox.id, this.self());
    return result;
  }

  async placeOf(id: string): Promise<SandboxPlace> {
    const owner = await this.owners.ownerOf(id);
    return owner === null || owner === this.self() ? { here: true } : { address: owner };
  }

  describe = (id: string) => this.local.describe(id);
  setTimeout = (id: string, timeoutSeconds: number) => this.local.setTimeout(id, timeoutSeconds);
  kill = (id: string) => this.local.kill(id);
  connect = (id: string, timeoutSeconds?: number) => this.local.connect(id, timeoutSeconds);
  metrics = (id: string) => this.local.metrics(id);
  pause = (id: string, request?: Parameters<SandboxHost['pause']>[1]) => this.local.pause(id, request);
  resume = (id: string, timeoutSeconds?: number) => this.local.resume(id, timeoutSeconds);
  snapshot = (id: string, request?: Parameters<SandboxHost['snapshot']>[1]) => this.local.snapshot(id, request);
  // Snapshots are kept by the worker that took them: listed and deleted there (docs/scaling.md).
  listSnapshots = (filter?: Parameters<SandboxHost['listSnapshots']>[0]) => this.local.listSnapshots(filter);
  deleteSnapshot = (idOrName: string, apiKey?: string) => this.local.deleteSnapshot(idOrName, apiKey);
  // Volumes live on the machine of the front door they were made through (docs/volumes.md).
  createVolume = (request: Parameters<SandboxHost['createVolume']>[0], apiKey?: string) => this.local.createVolume(request, apiKey);
  listVolumes = (apiKey?: string) => this.local.listVolumes(apiKey);
  describeVolume = (idOrName: string, apiKey?: string) => this.local.describeVolume(idOrName, apiKey);
  deleteVolume = (idOrName: string, apiKey?: string, force?: boolean) => this.local.deleteVolume(idOrName, apiKey, force);
  exec = (id: string, request: Parameters<SandboxHost['exec']>[1]) => this.local.exec(id, request);
  runCode = (id: string, request: Parameters<SandboxHost['runCode']>[1]) => this.local.runCode(id, request);
  readFile = (id: string, path: string) => this.local.readFile(id, path);
  writeFile = (id: string, path: string, content: Buffer) => this.local.writeFile(id, path, content);
  maxFileBytes = () => this.local.maxFileBytes();
  envdSocket = () => this.local.envdSocket();
  syncSocket = () => this.local.syncSocket();
  takeConnection = (socket: Socket, head: Buffer) => this.local.takeConnection?.(socket, head) ?? false;
  takeBackAt = (socketPath: string) => this.local.takeBackAt?.(socketPath);
}
