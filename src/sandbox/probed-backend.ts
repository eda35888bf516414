import type { BackendCapabilities } from '../contract/backend.js';
import type { BackendKind } from '../contract/backend-kinds.js';
import { SandboxUnavailableError, type BackendStatus, type PreparedSandbox, type SandboxBackend } from './types.js';

export interface HostProbe {
  /** What this host lacks for the backend (empty: everything it needs is here). */
  missing(): Promise<string[]>;
}

/**
 * A backend kind this build declares and probes but cannot run jobs on: the registry lists it
 * with what the host has and lacks, and every job asking for it ends `backend_unavailable`
 * with that reason, never on another backend.
 */
export class ProbedBackend implements SandboxBackend {
  constructor(
    readonly kind: BackendKind,
    readonly capabilities: BackendCapabilities,
    private readonly probe: HostProbe,
    /** Why jobs cannot run even where the host has every part. */
    private readonly notBuilt: string,
  ) {}

  get name(): string {
    return this.kind;
  }

  async status(): Promise<BackendStatus> {
    const missing = await this.probe.missing();
    return { kind: this.kind, name: this.name, available: false, notes: [...missing, this.notBuilt], resourceControl: 'rlimits-only' };
  }

  async prepare(): Promise<PreparedSandbox> {
    throw new SandboxUnavailableError(`the ${this.kind} backend is not available here: ${(await this.status()).notes.join('; ')}`);
  }

  async dispose(): Promise<void> {}
}
