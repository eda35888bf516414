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
  /** Kinds whose first probe has not answered yet: described as preparing, never waited for. */
  private readonly preparing = new Set<BackendKind>();
  private preparationStarted = false;

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

  /**
   * Starts every backend's host preparation (a guest image build, an accelerator probe) and
   * does not wait for it: a service listens at once. A job for a backend still preparing waits
   * for it in prepare(), which awaits the same preparation.
   */
  prepareInBackground(): void {
    if (this.preparationStarted) return;
    this.preparationStarted = true;
    for (const backend of this.backends.values()) {
      this.preparing.add(backend.kind);
      const settled = () => void this.preparing.delete(backend.kind);
      void backend.status().then(settled, settled);
    }
  }

  /** Every backend as it is now; one still preparing (prepareInBackground) is described so, unwaited. */
  async describe(): Promise<BackendDescription[]> {
    return Promise.all(
      [...this.backends.values()].map(async (backend) => {
        const aliases = Object.entries(BACKEND_ALIASES)
          .filter(([, kind]) => kind === backend.kind)
          .map(([alias]) => alias);
        const base = { kind: backend.kind, aliases, capabilities: backend.capabilities };
        if (this.preparing.has(backend.kind)) {
          return {
            ...base,
            available: false,
            state: 'preparing' as const,
            notes: ['still being prepared on this host (its probes, a guest image build): jobs for it wait until it is ready'],
          };
        }
        const status = await backend.status();
        return { ...base, available: status.available, state: status.available ? ('ready' as const) : ('unavailable' as const), notes: status.notes };
      }),
    );
  }

  async dispose(): Promise<void> {
    await Promise.all([...this.backends.values()].map((backend) => backend.dispose()));
  }
}
