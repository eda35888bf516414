import { BACKEND_ALIASES, BACKEND_KINDS, canonicalKind, type BackendKind } from '../contract/backend-kinds.js';
import type { BackendDescription } from '../contract/backend.js';
import { SandboxUnavailableError, type SandboxBackend } from './types.js';

/**
 * Every sandbox backend by kind. Faces name a kind (or nothing, for the configured default);
 * the registry answers with the backend, or with SandboxUnavailableError naming why not, which
 * every face reports as `backend.unavailable`. A job never falls back to another kind.
 */
export class BackendRegistry {
  private readonly backends = new Map<BackendKind, SandboxBackend>();

  constructor(
    backends: readonly SandboxBackend[],
    readonly defaultKind: BackendKind,
  ) {
    for (const backend of backends) this.backends.set(backend.kind, backend);
  }

  /** The backend for a requested kind or alias (undefined: the default). */
  get(requested?: string): SandboxBackend {
    const kind = requested === undefined ? this.defaultKind : canonicalKind(requested);
    if (kind === null) throw new SandboxUnavailableError(`unknown backend kind ${JSON.stringify(requested)}; known kinds: ${BACKEND_KINDS.join(', ')}`);
    const backend = this.backends.get(kind);
    if (!backend) throw new SandboxUnavailableError(`no ${kind} backend is registered in this process`);
    return backend;
  }

  /**
   * The kind a request would run on (aliases resolved); a name no backend has stays as it was
   * given, so the job is refused by get() (backend.unavailable), never run on another kind.
   */
  kindOf(requested?: string): string {
    return requested === undefined ? this.defaultKind : (canonicalKind(requested) ?? requested);
  }

  async describe(): Promise<BackendDescription[]> {
    return Promise.all(
      [...this.backends.values()].map(async (backend) => {
        const status = await backend.status();
        return {
          kind: backend.kind,
          aliases: Object.entries(BACKEND_ALIASES)
            .filter(([, kind]) => kind === backend.kind)
            .map(([alias]) => alias),
          available: status.available,
          notes: status.notes,
          capabilities: backend.capabilities,
        };
      }),
    );
  }

  async dispose(): Promise<void> {
    await Promise.all([...this.backends.values()].map((backend) => backend.dispose()));
  }
}
