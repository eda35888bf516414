import { BACKEND_ALIASES, BACKEND_KINDS, canonicalKind, type BackendKind } from '../contract/backend-kinds.js';
import type { BackendDescription, BackendPreparation } from '../contract/backend.js';
import { SandboxUnavailableError, type PreparationProgress, type SandboxBackend } from './types.js';

/**
 * Every sandbox backend by kind. Faces name a kind (or nothing, for the configured default);
 * the registry answers with the backend, or with SandboxUnavailableError naming why not, which
 * every face reports as `backend.unavailable`. A job never falls back to another kind.
 */
export class BackendRegistry {
  private readonly backends = new Map<BackendKind, SandboxBackend>();
  /** Kinds whose first probe has not answered yet, and when it will: described as preparing, never waited for. */
  private readonly preparing = new Map<BackendKind, Promise<void>>();
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
      const settled = () => void this.preparing.delete(backend.kind);
      this.preparing.set(backend.kind, backend.status().then(settled, settled));
    }
  }

  /**
   * Waits for a backend still being prepared, at most `timeoutMs` (the job's own timeout): a
   * job submitted on a first start runs once its backend is ready rather than failing, and
   * one whose timeout passes first ends backend.unavailable saying why.
   */
  async whenPrepared(backend: SandboxBackend, timeoutMs: number): Promise<void> {
    const preparation = this.preparing.get(backend.kind);
    if (!preparation) return;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new SandboxUnavailableError(`the ${backend.kind} backend was still being prepared on this host when the job's timeout (${timeoutMs} ms) passed`)),
        timeoutMs,
      );
    });
    try {
      await Promise.race([preparation, late]);
    } finally {
      clearTimeout(timer);
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

  /**
   * `agent-runner prepare`: each kind's host preparation (SandboxBackend.prepareHost), one kind
   * after another (each is heavy, and its progress reads in order), saying how each ended.
   */
  async prepareHosts(kinds: readonly BackendKind[], progressOf: (kind: BackendKind) => PreparationProgress): Promise<BackendPreparation[]> {
    const report: BackendPreparation[] = [];
    for (const kind of kinds) {
      const started = performance.now();
      const status = await this.get(kind).prepareHost(progressOf(kind));
      const seconds = Math.round(performance.now() - started) / 1000;
      report.push({ kind, state: status.available ? 'ready' : 'unavailable', notes: status.notes, seconds });
    }
    return report;
  }

  async dispose(): Promise<void> {
    await Promise.all([...this.backends.values()].map((backend) => backend.dispose()));
  }
}
