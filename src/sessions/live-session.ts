import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { CodedError, contractError, type ErrorCode } from '../contract/errors.js';
import type { Session, SessionExecRequest, SessionExecResult, SessionFileWritten } from '../contract/session.js';
import { BridgeLost, KernelBridge, type KernelLanguage } from '../interpreter/kernel-bridge.js';
import { gatherCell, MAX_CELL_RESULT_BYTES, type GatheredCell } from '../interpreter/run-cell.js';
import { SandboxGoneError } from '../sandboxes/agent-port.js';
import { LiveSandbox, type SandboxPlan } from '../sandboxes/live-sandbox.js';
import { runToEnd } from '../sandboxes/sandbox-exec.js';
import { readSandboxFile, writeSandboxFile } from '../sandboxes/sandbox-files.js';
import { KeptOutput } from '../util/kept-output.js';

/** The work dir, as cells and commands see it (their cwd). */
export const SESSION_WORK_DIR = '/workspace';
/**
 * A cell past its timeout is interrupted; one that ignores it has its kernel replaced by the
 * bridge within seconds. A bridge that says nothing this long after the timeout is itself
 * stuck: the session is ended.
 */
const STOP_GRACE_MS = 10_000;
const MAX_PATH_LENGTH = 4096;

/** Everything a session is made of, checked and resolved by Sessions.create. */
export interface SessionPlan {
  id: string;
  /** The language cells run in; null: commands and files only. */
  lang: string | null;
  /** The code-interpreter kernel its cells run in (interpreter/kernel-bridge.ts). */
  kernel: KernelLanguage | null;
  /** The interpreter a javascript kernel runs on: the node toolchain the host resolved. */
  interpreter: string;
  /** The version of the interpreter cells run in. */
  version: string | null;
  /** Its sandbox: work dir SESSION_WORK_DIR, its lifetime the timeout, its policy the exec guard. */
  sandbox: SandboxPlan;
  idleTimeoutSeconds: number;
  /** Output kept of each stream, and of a value or error. */
  outputBytes: number;
}

type ExecOptions = { timeoutMs: number };

/**
 * One session: a long-lived sandbox (sandboxes/live-sandbox.ts: its agent runs commands and
 * moves files) with, for a language, one code-interpreter kernel its cells run in, so a cell
 * shows what a notebook shows (values, display(), figures, tables). Requests are served one at
 * a time, in arrival order. The session ends when deleted, idle past its timeout, at its
 * lifetime, when a cell does not stop at its timeout (its names would be gone), or when its
 * interpreter exits.
 */
export class LiveSession {
  private sandbox: LiveSandbox | null = null;
  private bridge: KernelBridge | null = null;
  /** Aborted when the session ends: a command or cell waiting on it stops waiting. */
  private readonly ending = new AbortController();
  private readonly createdAt = new Date();
  private lastUsedAt = new Date();
  private readonly expiresAt: Date;
  private queue: Promise<unknown> = Promise.resolve();
  private idleTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly plan: SessionPlan,
    private readonly onEnded: (session: LiveSession) => void,
  ) {
    this.expiresAt = new Date(this.createdAt.getTime() + plan.sandbox.timeoutMs);
  }

  /** Makes the sandbox and starts its kernel; throws CodedError (backend.unavailable, backend.setup_failed). */
  static async start(plan: SessionPlan, onEnded: (session: LiveSession) => void): Promise<LiveSession> {
    const session = new LiveSession(plan, onEnded);
    await session.launch();
    return session;
  }

  get id(): string {
    return this.plan.id;
  }

  get lang(): string | null {
    return this.plan.lang;
  }

  get running(): boolean {
    return this.sandbox?.running ?? false;
  }

  /** Why it ended; null while it runs. */
  private get endedReason(): string | null {
    return this.sandbox?.endedReason ?? null;
  }

  describe(): Session {
    return {
      id: this.plan.id,
      lang: this.plan.lang,
      version: this.plan.version,
      backend: this.plan.sandbox.backend.kind,
      state: this.running ? 'running' : 'ended',
      created_at: this.createdAt.toISOString(),
      last_used_at: this.lastUsedAt.toISOString(),
      idle_timeout_seconds: this.plan.idleTimeoutSeconds,
      expires_at: this.expiresAt.toISOString(),
      work_dir: SESSION_WORK_DIR,
      ...(this.endedReason === null ? {} : { ended_reason: this.endedReason }),
      ...(this.plan.sandbox.apiKey !== undefined && { api_key: this.plan.sandbox.apiKey }),
    };
  }

  /** A cell in the interpreter, or a command in the work dir (policy checked by the caller, enforced by the sandbox). */
  exec(request: SessionExecRequest, options: ExecOptions): Promise<SessionExecResult> {
    return this.serve(() => ('code' in request ? this.cell(request.code, options.timeoutMs) : this.command(request.argv, request.stdin, options.timeoutMs)));
  }

  async writeFile(path: string, content: Buffer): Promise<SessionFileWritten> {
    const relative = this.checkPath(path);
    if (content.length > this.plan.sandbox.maxFileBytes) throw tooLarge(path, content.length, this.plan.sandbox.maxFileBytes);
    await this.serve(() => sessionFile(() => writeSandboxFile(this.sandbox!.agent, relative, content, this.plan.sandbox.maxFileBytes, { beneath: SESSION_WORK_DIR })));
    return { path: relative, bytes: content.length, sha256: createHash('sha256').update(content).digest('hex') };
  }

  async readFile(path: string): Promise<Buffer> {
    const relative = this.checkPath(path);
    return this.serve(() => sessionFile(() => readSandboxFile(this.sandbox!.agent, relative, this.plan.sandbox.maxFileBytes, SESSION_WORK_DIR)));
  }

  /** Ends the session (idempotent): its sandbox, and every process in it, ends. */
  async end(reason: string): Promise<void> {
    await this.sandbox?.end(reason);
  }

  private async launch(): Promise<void> {
    const sandbox = await LiveSandbox.start(this.plan.sandbox, () => this.ended());
    this.sandbox = sandbox;
    const { kernel } = this.plan;
    if (kernel !== null) {
      try {
        this.bridge = await KernelBridge.start({ agent: sandbox.agent, python: sandbox.python, cwd: SESSION_WORK_DIR, language: kernel, node: this.plan.interpreter });
      } catch (error) {
        const said = error instanceof Error ? error.message : String(error);
        await sandbox.end(`the interpreter could not start: ${said}`);
        throw new CodedError(contractError('backend.setup_failed', `the session could not start: ${this.endedReason}`), { http_status: 500 });
      }
      // A kernel that ends on its own (a cell called os._exit) ends the session: its names are gone.
      this.bridge.onLost((lost) => void this.end(`the interpreter exited: ${lost.message}`));
    }
    this.touch();
  }

  private ended(): void {
    clearTimeout(this.idleTimer);
    this.ending.abort(new SandboxGoneError(`session ${this.plan.id} has ended`));
    this.onEnded(this);
  }

  private async cell(code: string, timeoutMs: number): Promise<SessionExecResult> {
    const bridge = this.bridge!;
    const limits = { timeoutMs, maxStdoutBytes: this.plan.outputBytes, maxStderrBytes: this.plan.outputBytes, maxResultBytes: MAX_CELL_RESULT_BYTES };
    const began = performance.now();
    let backstop: NodeJS.Timeout | undefined;
    const stuck = new Promise<'stuck'>((resolve) => {
      backstop = setTimeout(() => resolve('stuck'), timeoutMs + STOP_GRACE_MS);
    });
    let gathered: GatheredCell | 'stuck';
    try {
      gathered = await Promise.race([gatherCell((onOutput, signal) => bridge.execute(code, {}, onOutput, signal), limits, this.ending.signal), stuck]);
    } catch (error) {
      if (!(error instanceof BridgeLost) && !(error instanceof SandboxGoneError)) throw error;
      return this.endedBy(`the interpreter exited: ${error.message}`, false, began);
    } finally {
      clearTimeout(backstop);
    }
    // Neither the cell nor the bridge answered after the interrupt and the bridge's own grace.
    if (gathered === 'stuck') return this.endedBy(this.didNotStop(timeoutMs), true, began);
    const { error } = gathered;
    // The bridge replaced a kernel that ignored the interrupt (or died): the cells' names are gone,
    // and so is the session. Its own error lines have no traceback; a cell's exception always has one.
    const bridgeSaid = error !== null && error.traceback === '' ? error.name : null;
    if (bridgeSaid === 'ContextRestarted') return this.endedBy(this.didNotStop(timeoutMs), true, began);
    if (bridgeSaid === 'KernelDied') return this.endedBy(`the interpreter exited: ${error!.value}`, false, began);
    const main = gathered.results.find((result) => result.is_main_result);
    const traceback = error === null ? '' : stripVTControlCharacters(error.traceback);
    const limit = this.plan.outputBytes;
    return {
      session_id: this.plan.id,
      stdout: gathered.stdout,
      stderr: traceback === '' ? gathered.stderr : capped('stderr', `${gathered.stderr}${traceback.endsWith('\n') ? traceback : `${traceback}\n`}`, limit),
      exit_code: gathered.timed_out ? 124 : error === null ? 0 : 1,
      error: error === null ? null : capped('error', error.value === '' ? error.name : `${error.name}: ${error.value}`, limit),
      value: main?.text === undefined ? null : capped('value', main.text, limit),
      // Each result's text held to the cap its value has (its other formats count toward MAX_CELL_RESULT_BYTES).
      results: gathered.results.map((result) => (result.text === undefined ? result : { ...result, text: capped('text', result.text, limit) })),
      timed_out: gathered.timed_out,
      session_ended: false,
      duration_ms: gathered.duration_ms,
    };
  }

  private async command(argv: readonly string[], stdin: string | undefined, timeoutMs: number): Promise<SessionExecResult> {
    const began = performance.now();
    const limits = { timeoutMs, maxStdoutBytes: this.plan.outputBytes, maxStderrBytes: this.plan.outputBytes };
    try {
      const ran = await runToEnd(
        this.plan.id,
        this.sandbox!.agent,
        { argv: [...argv], cwd: SESSION_WORK_DIR, ...(stdin === undefined ? {} : { stdin }) },
        limits,
        this.ending.signal,
      );
      return {
        session_id: this.plan.id,
        stdout: ran.stdout,
        stderr: ran.stderr,
        exit_code: ran.exit_code,
        error: null,
        value: null,
        results: [],
        timed_out: ran.timed_out,
        session_ended: false,
        duration_ms: ran.duration_ms,
      };
    } catch (error) {
      if (!(error instanceof SandboxGoneError)) throw error;
      return this.endedBy(this.endedReason ?? error.message, false, began);
    }
  }

  private didNotStop(timeoutMs: number): string {
    return `the cell did not stop at its timeout of ${timeoutMs / 1000} s, so the session was ended`;
  }

  /** Ends the session for `reason` and answers the request that met it with why. */
  private async endedBy(reason: string, timedOut: boolean, began: number): Promise<SessionExecResult> {
    await this.end(reason);
    return {
      session_id: this.plan.id,
      stdout: '',
      stderr: `${this.endedReason}\n`,
      exit_code: timedOut ? 124 : 1,
      error: this.endedReason,
      value: null,
      results: [],
      timed_out: timedOut,
      session_ended: true,
      duration_ms: Math.round(performance.now() - began),
    };
  }

  private endedError(): CodedError {
    return new CodedError(contractError('session.ended', `session ${this.plan.id} has ended: ${this.endedReason}`, { ended_reason: this.endedReason }));
  }

  /** Serves one request after those before it; refused once the session has ended. */
  private serve<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(async () => {
      if (!this.running) throw this.endedError();
      clearTimeout(this.idleTimer);
      try {
        return await work();
      } catch (error) {
        if (error instanceof SandboxGoneError && !this.running) throw this.endedError();
        throw error;
      } finally {
        this.touch();
      }
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  private touch(): void {
    this.lastUsedAt = new Date();
    if (!this.running) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => void this.end(`idle for ${this.plan.idleTimeoutSeconds} s`), this.plan.idleTimeoutSeconds * 1000);
    this.idleTimer.unref();
  }

  /**
   * A path relative to the work dir, no `..`, no empty or `.` segments: refused here, early. Its
   * links are followed only while they stay in the work dir, which the agent enforces as it
   * opens the file inside the sandbox (readSandboxFile's `beneath`).
   */
  private checkPath(path: string): string {
    const segments = path.split('/');
    if (
      path.length === 0 ||
      path.length > MAX_PATH_LENGTH ||
      path.startsWith('/') ||
      segments.some((segment) => segment === '..' || segment === '.' || segment === '') ||
      path.includes('\0')
    ) {
      throw new CodedError(contractError('validation.path_escape', `${JSON.stringify(path)} is not a path inside the work dir (relative, no . or .. segments)`, { path }));
    }
    return posix.normalize(path);
  }
}

/** A sandbox's refusal of a file as the session's. */
const SESSION_FILE_ERROR: Partial<Record<ErrorCode, ErrorCode>> = {
  'sandbox.file_not_found': 'session.file_not_found',
  'sandbox.file_not_regular': 'session.file_not_regular',
  'sandbox.file_too_large': 'session.file_too_large',
};

async function sessionFile<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    // The others (denied, failed, busy) say what they say of a sandbox's file.
    const code = error instanceof CodedError ? SESSION_FILE_ERROR[error.code] : undefined;
    if (code === undefined) throw error;
    throw new CodedError(contractError(code, (error as CodedError).error.message, (error as CodedError).error.details));
  }
}

/** The first `limit` bytes of `text` (whole characters), with a note when it had more: as any output is kept. */
function capped(name: string, text: string, limit: number): string {
  const kept = new KeptOutput(limit);
  kept.add(Buffer.from(text, 'utf8'));
  return kept.text(name);
}

function tooLarge(path: string, bytes: number, limit: number): CodedError {
  return new CodedError(contractError('session.file_too_large', `${path} has ${bytes} bytes, over the session file limit of ${limit}`, { path, limit }));
}
