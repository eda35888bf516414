import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { CodedError, contractError } from '../contract/errors.js';
import type { Session, SessionExecRequest, SessionExecResult, SessionFileWritten } from '../contract/session.js';
import { KernelFileReplySchema, KernelRunReplySchema, type KernelRequest, type KernelRunReply } from '../contract/session-kernel.js';
import type { SessionSettings } from '../config/schema.js';
import type { Invocation } from '../languages/language.js';
import { execRulesFor, type ExecPolicy } from '../policy/exec-rules.js';
import { SANDBOX_SEARCH_PATH } from '../sandbox/profiles.js';
import type { ExecRules, Mount, PreparedSandbox, SandboxBackend, SandboxNetwork } from '../sandbox/types.js';
import { refusedHere, ServedSandbox } from '../sandboxes/served-sandbox.js';
import { KernelChannel, KernelLost } from './kernel-channel.js';
import { utf8Prefix } from '../util/utf8-prefix.js';

/** The work dir, as cells and commands see it (their cwd). */
export const SESSION_WORK_DIR = '/workspace';
/** A cell or command past its timeout has this long to answer (interrupted) before the session is ended. */
const STOP_GRACE_MS = 2000;
/** File operations answer at once unless the kernel is stuck. */
const FILE_DEADLINE_MS = 30_000;
const MAX_PATH_LENGTH = 4096;

/** Everything a session is made of, checked and resolved by Sessions.create. */
export interface SessionPlan {
  id: string;
  /** The language cells run in; null: commands and files only (on the python kernel). */
  lang: string | null;
  kernel: Invocation;
  /** Sandbox paths of the programs the kernel runs as (the python launcher, then the language's interpreter). */
  interpreters: readonly string[];
  /** Read-only toolchain mounts the kernel runs from. */
  mounts: readonly Mount[];
  /** Enforced inside the sandbox (shells hidden, exec guard), the argv check being the early refusal. */
  policy: ExecPolicy;
  backend: SandboxBackend;
  memoryBytes: number;
  maxProcesses: number;
  maxOpenFiles: number;
  maxFileBytes: number;
  cpuCores: number;
  network: SandboxNetwork;
  idleTimeoutSeconds: number;
  settings: SessionSettings;
  outputBytes: number;
}

type ExecOptions = { timeoutMs: number };

/**
 * One session: a sandbox whose one long job is a kernel (languages/session-*.ts) that serves
 * requests until the session ends. Requests are served one at a time, in arrival order. The
 * session ends when deleted, idle past its timeout, at its lifetime, when a cell does not stop
 * at its timeout (the one case the kernel cannot recover from), or when the kernel exits.
 */
export class LiveSession {
  private readonly channel: KernelChannel;
  private readonly served: ServedSandbox;
  private readonly createdAt = new Date();
  private lastUsedAt = new Date();
  private readonly expiresAt: Date;
  private version: string | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private idleTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly plan: SessionPlan,
    onEnded: (session: LiveSession) => void,
  ) {
    this.channel = new KernelChannel(plan.maxFileBytes, plan.outputBytes);
    this.expiresAt = new Date(this.createdAt.getTime() + plan.settings.lifetimeSeconds * 1000);
    this.served = new ServedSandbox(this.channel, SERVED_BY, (reason) => {
      clearTimeout(this.idleTimer);
      this.channel.lose(`the session has ended: ${reason}`);
      onEnded(this);
    });
  }

  /** Makes the sandbox and waits for its kernel; throws CodedError (backend.unavailable, backend.setup_failed). */
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
    return this.served.running;
  }

  /** Why it ended; null while it runs. */
  private get endedReason(): string | null {
    return this.served.reason;
  }

  describe(): Session {
    return {
      id: this.plan.id,
      lang: this.plan.lang,
      version: this.version,
      backend: this.plan.backend.kind,
      state: this.running ? 'running' : 'ended',
      created_at: this.createdAt.toISOString(),
      last_used_at: this.lastUsedAt.toISOString(),
      idle_timeout_seconds: this.plan.idleTimeoutSeconds,
      expires_at: this.expiresAt.toISOString(),
      work_dir: SESSION_WORK_DIR,
      ...(this.endedReason === null ? {} : { ended_reason: this.endedReason }),
    };
  }

  /** A cell in the interpreter, or a command in the work dir (policy checked by the caller). */
  exec(request: SessionExecRequest, options: ExecOptions): Promise<SessionExecResult> {
    const message: KernelRequest =
      'code' in request
        ? { op: 'cell', code: request.code, timeout_ms: options.timeoutMs, output_bytes: this.plan.outputBytes }
        : {
            op: 'command',
            argv: request.argv,
            ...(request.stdin === undefined ? {} : { stdin: request.stdin }),
            timeout_ms: options.timeoutMs,
            output_bytes: this.plan.outputBytes,
          };
    return this.serve(async () => {
      const startedAt = performance.now();
      const took = () => Math.round(performance.now() - startedAt);
      try {
        const reply = await this.channel.request(message, KernelRunReplySchema, options.timeoutMs + STOP_GRACE_MS);
        return this.result(reply, took());
      } catch (error) {
        if (!(error instanceof KernelLost)) throw error;
        const what = message.op === 'cell' ? 'the cell' : 'the command';
        const reason = error.deadline ? `${what} did not stop at its timeout of ${options.timeoutMs / 1000} s, so the session was ended` : error.message;
        await this.end(reason);
        return {
          session_id: this.plan.id,
          stdout: '',
          stderr: `${this.endedReason}\n`,
          exit_code: error.deadline ? 124 : 1,
          error: this.endedReason,
          value: null,
          timed_out: error.deadline,
          session_ended: true,
          duration_ms: took(),
        };
      }
    });
  }

  async writeFile(path: string, content: Buffer): Promise<SessionFileWritten> {
    const relative = this.checkPath(path);
    if (content.length > this.plan.maxFileBytes) throw tooLarge(path, content.length, this.plan.maxFileBytes);
    const reply = await this.serve(() => this.fileRequest({ op: 'write', path: relative, data: content.toString('base64') }));
    if (!('bytes' in reply)) throw new Error('the kernel answered a write without its size');
    return { path: relative, bytes: content.length, sha256: createHash('sha256').update(content).digest('hex') };
  }

  async readFile(path: string): Promise<Buffer> {
    const relative = this.checkPath(path);
    const reply = await this.serve(() => this.fileRequest({ op: 'read', path: relative, max_bytes: this.plan.maxFileBytes }));
    if (!('data' in reply)) throw new Error('the kernel answered a read without its bytes');
    const content = Buffer.from(reply.data, 'base64');
    // The kernel is the job's: its word on the size is checked here too.
    if (content.length > this.plan.maxFileBytes) throw tooLarge(path, content.length, this.plan.maxFileBytes);
    return content;
  }

  /** Ends the session (idempotent): the kernel's stdin closes and its whole sandbox is killed. */
  end(reason: string): Promise<void> {
    return this.served.end(reason);
  }

  private async launch(): Promise<void> {
    const { plan } = this;
    const template = {
      profile: 'run-job',
      argv: plan.kernel.argv,
      cwd: SESSION_WORK_DIR,
      env: plan.kernel.env,
      mounts: plan.mounts,
      files: [],
      workDir: SESSION_WORK_DIR,
      workDirBytes: plan.settings.workDirBytes,
      network: plan.network,
      // The policy holds inside, for the kernel and all it starts, as a run job's does.
      guardExec: true,
      withoutShells: !plan.policy.allow_shell,
      // The session may run anything (node, compilers): bounded as a whole by its cgroup.
      limits: {
        memoryBytes: plan.memoryBytes,
        memoryMechanism: 'cgroup',
        maxProcesses: plan.maxProcesses,
        maxOpenFiles: plan.maxOpenFiles,
        maxFileBytes: plan.maxFileBytes,
        cpuCores: plan.cpuCores,
      },
    } as const;
    let prepared;
    try {
      prepared = await plan.backend.prepare(template);
    } catch (error) {
      throw refusedHere(error);
    }
    try {
      await prepared.restrictExec(await this.execRules(prepared));
    } catch (error) {
      prepared.discard();
      throw refusedHere(error);
    }
    this.served.serve(prepared, plan.settings.lifetimeSeconds * 1000);
    this.version = (await this.served.untilReady(this.channel.started(), plan.settings.startTimeoutSeconds, 'the session')).version;
    this.touch();
  }

  /**
   * The session's exec rules, from the same translation as a run job's: the kernel's launcher
   * is the program, the interpreters it becomes and their toolchain trees are its own.
   */
  private async execRules(sandbox: PreparedSandbox): Promise<ExecRules> {
    const lookup = { searchPath: SANDBOX_SEARCH_PATH, cwd: SESSION_WORK_DIR };
    const commands = await Promise.all(this.plan.interpreters.map((path) => sandbox.resolveCommand(path, lookup)));
    return execRulesFor(
      this.plan.policy,
      {
        program: this.plan.kernel.argv[0]!,
        commands: commands.filter((command) => command !== null),
        trees: this.plan.mounts.filter((mount) => !mount.writable).map((mount) => mount.sandbox),
      },
      sandbox,
      SESSION_WORK_DIR,
    );
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

  private async fileRequest(message: Extract<KernelRequest, { op: 'write' | 'read' }>) {
    let reply;
    try {
      reply = await this.channel.request(message, KernelFileReplySchema, FILE_DEADLINE_MS);
    } catch (error) {
      if (!(error instanceof KernelLost)) throw error;
      await this.end(error.message);
      throw this.endedError();
    }
    if (!('error' in reply)) return reply;
    const { code, message: said } = reply.error;
    if (code === 'not_found') throw new CodedError(contractError('session.file_not_found', said, { path: message.path }));
    if (code === 'not_a_file') throw new CodedError(contractError('session.file_not_regular', said, { path: message.path }));
    if (code === 'too_large') throw new CodedError(contractError('session.file_too_large', said, { path: message.path }));
    throw new CodedError(contractError('validation.invalid_request', said, { path: message.path }));
  }

  /** A path relative to the work dir, no `..`, no empty or `.` segments: the form is checked here, links by the kernel. */
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

  /** The reply with the host's cap on each of its texts: the kernel's word on their sizes is not trusted. */
  private result(reply: KernelRunReply, durationMs: number): SessionExecResult {
    const limit = this.plan.outputBytes;
    return {
      session_id: this.plan.id,
      stdout: capped('stdout', reply.stdout, reply.stdout_bytes, limit),
      stderr: capped('stderr', reply.stderr, reply.stderr_bytes, limit),
      exit_code: reply.exit_code,
      error: reply.error === null ? null : capped('error', reply.error, reply.error_bytes ?? 0, limit),
      value: reply.value === null ? null : capped('value', reply.value, reply.value_bytes ?? 0, limit),
      timed_out: reply.status === 'timed_out',
      session_ended: false,
      duration_ms: durationMs,
    };
  }
}

/**
 * The first `limit` bytes of `text` (whole characters), with a note when it had more: more
 * than it holds, or than the kernel says it cut it from (`claimed`).
 */
function capped(name: string, text: string, claimed: number, limit: number): string {
  const bytes = Buffer.from(text, 'utf8');
  const kept = utf8Prefix(bytes, limit);
  const total = Math.max(claimed, bytes.length);
  if (total <= kept.length) return text;
  return `${kept.toString('utf8')}\n[${name} truncated: ${total} bytes, the first ${kept.length} kept]`;
}

function tooLarge(path: string, bytes: number, limit: number): CodedError {
  return new CodedError(contractError('session.file_too_large', `${path} has ${bytes} bytes, over the session file limit of ${limit}`, { path, limit }));
}

const SERVED_BY = { program: 'the interpreter', timedOut: 'its lifetime ran out', aborted: 'ended', outOfMemory: 'the session ran out of memory and was killed' };
