import { randomUUID } from 'node:crypto';
import type { Context, OutputLine } from '../contract/code-interpreter.js';
import { AgentOperationError, type SandboxAgentPort } from '../sandboxes/agent-port.js';
import { KernelBridge, type KernelLanguage } from './kernel-bridge.js';
import { esbuildExecutable, transpileCell } from './typescript-cells.js';

/**
 * Contexts with kernels one sandbox may hold (a default context counts from its first cell). Each is a kernel process (IPython: about 50 MB) under the
 * sandbox's memory and process limits; past this a create is refused rather than the sandbox
 * filling with kernels no one uses.
 */
const MAX_CONTEXTS_PER_SANDBOX = 16;

/**
 * The contexts every sandbox lists from the start, as E2B's server makes them when it starts:
 * each one's kernel starts with its first cell (until then it costs nothing, and counts against no cap).
 */
const DEFAULT_LANGUAGES: readonly ContextLanguage[] = ['python', 'javascript'];

/** A context's language: a kernel's, or typescript (cells stripped of their types on the host, run by a javascript kernel). */
type ContextLanguage = KernelLanguage | 'typescript';

/** The languages a context can run here, by every name E2B's server takes for them. */
const LANGUAGE_NAMES: Record<string, ContextLanguage> = {
  python: 'python',
  python3: 'python',
  javascript: 'javascript',
  js: 'javascript',
  typescript: 'typescript',
  ts: 'typescript',
  bash: 'bash',
  sh: 'bash',
  java: 'java',
  r: 'r',
};

/** What the code interpreter needs of a running sandbox. */
export interface InterpreterTarget {
  agent: SandboxAgentPort;
  /** The sandbox's python (the bridge and the python kernel run on it). */
  python: string;
  home: string;
}

/** Why a request about contexts failed, with the status E2B's server answers it with. */
export class ContextError extends Error {
  constructor(
    readonly status: 400 | 404 | 429 | 500 | 502,
    message: string,
  ) {
    super(message);
    this.name = 'ContextError';
  }
}

/**
 * One context: a kernel bridge and the cells waiting their turn on it (a context runs one at a
 * time). A default context has no bridge until its first cell.
 */
class CodeContext {
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    readonly id: string,
    readonly language: ContextLanguage,
    readonly cwd: string,
    public bridge: KernelBridge | null,
  ) {}

  describe(): Context {
    return { id: this.id, language: this.language, cwd: this.cwd };
  }

  /** Runs `work` after the cells before it, whatever became of them. */
  inTurn<T>(work: () => Promise<T>): Promise<T> {
    const turn = this.tail.then(work, work);
    this.tail = turn.catch(() => undefined);
    return turn;
  }
}

export interface ExecuteOptions {
  code: string;
  contextId?: string | null;
  language?: string | null;
  envVars?: Record<string, string> | null;
  /** Interrupts the cell when it aborts (the client left, or the run's timeout passed); the context stays. */
  signal: AbortSignal;
  onOutput(line: OutputLine): void;
}

/**
 * The code-interpreter contexts of every sandbox of this host (E2B's port 49999): created on
 * request, or on the first cell of a language without a context (its default context, as E2B's
 * server keeps one per language), each a kernel inside its sandbox. A context belongs to the
 * sandbox that made it: another sandbox's request for its id finds nothing.
 */
export class CodeContexts {
  private readonly bySandbox = new Map<string, Map<string, CodeContext>>();
  private readonly defaults = new Map<string, Map<ContextLanguage, Promise<CodeContext>>>();
  /** Sandboxes kept with their memory, whose contexts wait for them (suspend, resumed). */
  private readonly suspended = new Set<string>();
  /** Contexts whose kernel is starting, per sandbox: they count against the cap already. */
  private readonly starting = new Map<string, number>();

  async create(sandboxId: string, target: InterpreterTarget, language: string | null | undefined, cwd: string | null | undefined): Promise<Context> {
    return (await this.open(sandboxId, target, languageOf(language), cwd ?? target.home)).describe();
  }

  /** The sandbox's contexts, its default ones first (listed before their first cell, as E2B's server lists them). */
  list(sandboxId: string, target: InterpreterTarget): Context[] {
    return [...this.contextsOf(sandboxId, target).values()].map((context) => context.describe());
  }

  async execute(sandboxId: string, target: InterpreterTarget, options: ExecuteOptions): Promise<void> {
    if (options.contextId && options.language) throw new ContextError(400, 'Only one of context_id or language can be provided');
    const context = options.contextId ? this.find(sandboxId, options.contextId) : await this.defaultContext(sandboxId, target, languageOf(options.language));
    await context.inTurn(async () => {
      options.signal.throwIfAborted();
      if (context.bridge === null) context.bridge = await this.startKernel(sandboxId, target, context);
      else if (!context.bridge.alive) {
        const lost = context.bridge.lostReason();
        context.bridge = await this.startBridge(target, context.cwd, context.language);
        options.onOutput({ type: 'stderr', text: `[the context's kernel had ended (${lost}); this cell runs in a new one, without the state it had]\n` });
      }
      let code = options.code;
      if (context.language === 'typescript') {
        const transpiled = await transpileCell(esbuildExecutable() ?? 'esbuild', code);
        if ('error' in transpiled) return options.onOutput({ type: 'error', ...transpiled.error });
        code = transpiled.code;
      }
      await context.bridge.execute(code, options.envVars ?? {}, (line) => options.onOutput(asE2bShows(line)), options.signal);
    });
  }

  async interrupt(sandboxId: string, contextId: string): Promise<void> {
    await this.find(sandboxId, contextId).bridge?.interrupt();
  }

  /** A fresh kernel for the context: its state is gone, its id, language and cwd stay. */
  async restart(sandboxId: string, target: InterpreterTarget, contextId: string): Promise<void> {
    const context = this.find(sandboxId, contextId);
    await context.inTurn(async () => {
      // A default context before its first cell has no kernel yet: fresh as it is.
      if (context.bridge === null) return;
      // The bridge replaces its kernel itself; one that is gone (or goes with it) is started anew.
      if (context.bridge.alive) {
        try {
          return await context.bridge.restart();
        } catch {
          await context.bridge.stop();
        }
      }
      context.bridge = await this.startBridge(target, context.cwd, context.language);
    });
  }

  async remove(sandboxId: string, contextId: string): Promise<void> {
    const context = this.find(sandboxId, contextId);
    this.bySandbox.get(sandboxId)?.delete(context.id);
    await context.bridge?.stop();
  }

  /**
   * Its sandbox is being kept with its memory (a pause, a fork's parent, a snapshot's sandbox):
   * its contexts' kernels are kept with it, so they wait for resumed() instead of ending with it.
   */
  suspend(sandboxId: string): void {
    this.suspended.add(sandboxId);
    for (const context of this.bySandbox.get(sandboxId)?.values() ?? []) context.bridge?.suspend();
  }

  /**
   * The sandbox runs again under its id (resumed, come back, or never stopped as its keeping
   * failed): its contexts go on through `agent`, their kernels' state as it was. Null: it will
   * not come back, and its contexts are forgotten.
   */
  resumed(sandboxId: string, agent: SandboxAgentPort | null): void {
    if (!this.suspended.delete(sandboxId)) return;
    for (const context of this.bySandbox.get(sandboxId)?.values() ?? []) context.bridge?.resume(agent);
    if (agent === null) this.sandboxEnded(sandboxId);
  }

  /** Forgets the contexts of a sandbox that ended (its agent and the kernels in it are gone); a suspended one's wait. */
  sandboxEnded(sandboxId: string): void {
    if (this.suspended.has(sandboxId)) return;
    this.bySandbox.delete(sandboxId);
    this.defaults.delete(sandboxId);
  }

  private find(sandboxId: string, contextId: string): CodeContext {
    const context = this.bySandbox.get(sandboxId)?.get(contextId);
    if (!context) throw new ContextError(404, `Context ${contextId} not found`);
    return context;
  }

  /**
   * The language's default context: the one its first cell made, while it is still there. One
   * that was removed, or failed to start, is made again by the next cell.
   */
  private async defaultContext(sandboxId: string, target: InterpreterTarget, language: ContextLanguage): Promise<CodeContext> {
    this.contextsOf(sandboxId, target);
    let defaults = this.defaults.get(sandboxId);
    if (!defaults) this.defaults.set(sandboxId, (defaults = new Map()));
    const pending = defaults.get(language);
    if (pending) {
      const made = await pending.catch(() => undefined);
      if (made && this.bySandbox.get(sandboxId)?.get(made.id) === made) return made;
      // Another cell replaced it while this one waited: that one is the default now.
      if (defaults.get(language) !== pending) return this.defaultContext(sandboxId, target, language);
    }
    const opened = this.open(sandboxId, target, language, target.home);
    defaults.set(language, opened);
    return opened;
  }

  /** The sandbox's contexts; the first time, its default ones, without kernels yet. */
  private contextsOf(sandboxId: string, target: InterpreterTarget): Map<string, CodeContext> {
    let contexts = this.bySandbox.get(sandboxId);
    if (contexts) return contexts;
    this.bySandbox.set(sandboxId, (contexts = new Map()));
    const defaults = new Map<ContextLanguage, Promise<CodeContext>>();
    this.defaults.set(sandboxId, defaults);
    for (const language of DEFAULT_LANGUAGES) {
      const context = new CodeContext(randomUUID(), language, target.home, null);
      contexts.set(context.id, context);
      defaults.set(language, Promise.resolve(context));
    }
    return contexts;
  }

  /** The kernel of a default context, at its first cell; none when its sandbox ended meanwhile. */
  private async startKernel(sandboxId: string, target: InterpreterTarget, context: CodeContext): Promise<KernelBridge> {
    const bridge = await this.startBridge(target, context.cwd, context.language);
    if (this.bySandbox.get(sandboxId)?.get(context.id) !== context) {
      await bridge.stop();
      throw new ContextError(502, `sandbox ${sandboxId} ended while the context started`);
    }
    return bridge;
  }

  private async open(sandboxId: string, target: InterpreterTarget, language: ContextLanguage, cwd: string): Promise<CodeContext> {
    const contexts = this.contextsOf(sandboxId, target);
    const starting = this.starting.get(sandboxId) ?? 0;
    const kernels = [...contexts.values()].filter((context) => context.bridge !== null).length + starting;
    if (kernels >= MAX_CONTEXTS_PER_SANDBOX) {
      throw new ContextError(429, `sandbox ${sandboxId} has ${kernels} contexts with kernels, the most it may; remove one first`);
    }
    this.starting.set(sandboxId, starting + 1);
    let bridge: KernelBridge;
    try {
      bridge = await this.startBridge(target, cwd, language);
    } finally {
      const left = (this.starting.get(sandboxId) ?? 1) - 1;
      if (left > 0) this.starting.set(sandboxId, left);
      else this.starting.delete(sandboxId);
    }
    const context = new CodeContext(randomUUID(), language, cwd, bridge);
    // The sandbox may have ended while the kernel started: then nothing holds the context.
    if (this.bySandbox.get(sandboxId) !== contexts) {
      await bridge.stop();
      throw new ContextError(502, `sandbox ${sandboxId} ended while the context started`);
    }
    contexts.set(context.id, context);
    return context;
  }

  private async startBridge(target: InterpreterTarget, cwd: string, language: ContextLanguage): Promise<KernelBridge> {
    if (language === 'typescript' && esbuildExecutable() === null) {
      throw new ContextError(500, 'Failed to create context: typescript cells are stripped of their types by esbuild, which is not installed here (npm install esbuild)');
    }
    try {
      return await KernelBridge.start({
        agent: target.agent,
        python: target.python,
        cwd: target.home,
        workDir: cwd,
        language: language === 'typescript' ? 'javascript' : language,
      });
    } catch (error) {
      // A sandbox on an image runs the image's own python, found on its PATH.
      if (error instanceof AgentOperationError && error.code === 'not_found' && !target.python.includes('/')) {
        throw new ContextError(
          500,
          `Failed to create context: this sandbox's image has no ${target.python} on its PATH, which the code interpreter runs its kernels with (python cells need IPython in it too)`,
        );
      }
      throw new ContextError(500, `Failed to create context: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

function languageOf(name: string | null | undefined): ContextLanguage {
  const normalized = (name ?? 'python').trim().toLowerCase() || 'python';
  const language = LANGUAGE_NAMES[normalized];
  if (!language) throw new ContextError(400, `language '${name}' is not served here; this code interpreter runs: ${[...new Set(Object.values(LANGUAGE_NAMES))].join(', ')}`);
  return language;
}

/** A result as E2B's server gives it: a string's text without its quotes (the kernel says its repr). */
function asE2bShows(line: OutputLine): OutputLine {
  if (line.type !== 'result') return line;
  const { text } = line;
  if (typeof text !== 'string' || text.length < 2 || text[0] !== text.at(-1) || (text[0] !== "'" && text[0] !== '"')) return line;
  return { ...line, text: text.slice(1, -1) };
}
