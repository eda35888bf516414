import type { SandboxHost, SandboxPlace } from '../sandboxes/sandbox-host.js';
import type { Owners } from './owners.js';

/**
 * The sandboxes of the distributed mode, as one front door sees them. A sandbox lives in the
 * worker process of the front door that made it, which records itself as its owner; a request for
 * a sandbox another front door holds is forwarded there whole, at the HTTP level
 * (http/envd-proxy.ts), so every route and envd's streams reach it unchanged. Listing shows the
 * sandboxes of this front door's worker.
 */
export class ClusterSandboxes implements SandboxHost {
  constructor(
    private readonly local: SandboxHost,
    private readonly owners: Owners,
    /** This front door's address as the others reach it; known once it listens. */
    private readonly self: () => string,
  ) {}

  async create(request: Parameters<SandboxHost['create']>[0]) {
    const sandbox = await this.local.create(request);
    try {
      await this.owners.record(sandbox.id, this.self());
    } catch (error) {
      // Unrecorded, it would answer here only: kill it rather than hand out a half-reachable id.
      await this.local.kill(sandbox.id).catch(() => undefined);
      throw error;
    }
    return sandbox;
  }

  async placeOf(id: string): Promise<SandboxPlace> {
    const owner = await this.owners.ownerOf(id);
    return owner === null || owner === this.self() ? { here: true } : { address: owner };
  }

  list = () => this.local.list();
  describe = (id: string) => this.local.describe(id);
  setTimeout = (id: string, timeoutSeconds: number) => this.local.setTimeout(id, timeoutSeconds);
  kill = (id: string) => this.local.kill(id);
  connect = (id: string, timeoutSeconds?: number) => this.local.connect(id, timeoutSeconds);
  metrics = (id: string) => this.local.metrics(id);
  exec = (id: string, request: Parameters<SandboxHost['exec']>[1]) => this.local.exec(id, request);
  runCode = (id: string, request: Parameters<SandboxHost['runCode']>[1]) => this.local.runCode(id, request);
  readFile = (id: string, path: string) => this.local.readFile(id, path);
  writeFile = (id: string, path: string, content: Buffer) => this.local.writeFile(id, path, content);
  maxFileBytes = () => this.local.maxFileBytes();
  envdSocket = () => this.local.envdSocket();
}
