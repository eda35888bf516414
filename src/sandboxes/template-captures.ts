import type { RunnerRuntime } from '../runner/runtime.js';
import type { KeptSandboxes } from './kept-sandboxes.js';
import type { LiveSandbox } from './live-sandbox.js';
import type { LaunchRequest } from './sandbox-plan.js';
import type { SandboxTable } from './sandbox-table.js';
import type { KeptState } from './snapshot-store.js';

/** The sandboxes of templates with a start command captured by this process once ready (templateCapture). */
export class TemplateCaptures {
  /** Templates captured once ready (templateCapture), by template, image and backend; null: it could not be. */
  private readonly captures = new Map<string, Promise<KeptState | null>>();

  constructor(
    private readonly runtime: RunnerRuntime,
    private readonly table: SandboxTable,
    private readonly kept: KeptSandboxes,
    /** Sandboxes.launch, of a sandbox not from a kept state. */
    private readonly launch: (request: LaunchRequest, from: null) => Promise<LiveSandbox>,
  ) {}

  /**
   * E2B's model of a template with a start command, where the backend keeps memory: its sandboxes
   * start from one captured once its ready command succeeded, the start command's processes
   * running already. The first create of the template (its image, on the backend) makes it: a
   * sandbox of its own, kept whole as a fork's state is, then ended; one replaced by a new image
   * goes. Captures live as long as this process. Elsewhere, or where the capture failed (null),
   * each sandbox runs the start command itself.
   */
  async templateCapture(request: LaunchRequest): Promise<KeptState | null> {
    const made = request.imageTemplate;
    if (!made?.start) return null;
    let backend;
    try {
      backend = this.runtime.backends.get(request.backend?.kind);
    } catch {
      return null;
    }
    if (backend.capabilities.pause !== 'memory') return null;
    const key = `${made.name} ${backend.kind} ${made.image}`;
    let capture = this.captures.get(key);
    if (!capture) {
      for (const [older, state] of this.captures) {
        if (!older.startsWith(`${made.name} ${backend.kind} `)) continue;
        this.captures.delete(older);
        void this.forget(state);
      }
      capture = this.capture(made.name, backend.kind).catch(() => null);
      this.captures.set(key, capture);
    }
    return capture;
  }

  /** Templates captured by this process are its own: they go with it. */
  async close(): Promise<void> {
    await Promise.all([...this.captures.values()].map((capture) => this.forget(capture)));
  }

  /** A sandbox of template `name` on `kind` started (its start command ready), kept whole, and ended. */
  private async capture(name: string, kind: string): Promise<KeptState> {
    const sandbox = await this.launch({ template: name, backend: { kind } }, null);
    try {
      // A backend that keeps memory may not for a sandbox on an image (gVisor's): then none is captured.
      if (sandbox.pauseKind !== 'memory') throw new Error(`a sandbox of ${name} on ${kind} keeps no memory`);
      return await this.kept.keepWhole(sandbox);
    } finally {
      this.table.sandboxes.delete(sandbox.id);
      await sandbox.end('captured as its template');
    }
  }

  private forget(capture: Promise<KeptState | null>): Promise<unknown> {
    return capture.then((kept) => kept && this.kept.discard(kept.id)).catch(() => undefined);
  }
}
