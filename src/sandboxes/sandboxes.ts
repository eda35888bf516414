import { randomBytes, randomInt } from 'node:crypto';
import { CodedError, contractError } from '../contract/errors.js';
import type {
  Sandbox,
  SandboxCreateRequest,
  SandboxExecRequest,
  SandboxExecResult,
  SandboxFileWritten,
  SandboxMetrics,
  SandboxRunCodeRequest,
  SandboxRunCodeResult,
} from '../contract/sandbox.js';
import { CodeContexts, ContextError } from '../interpreter/code-contexts.js';
import { BridgeLost } from '../interpreter/kernel-bridge.js';
import { MAX_CELL_RESULT_BYTES, runCell } from '../interpreter/run-cell.js';
import { python } from '../languages/python.js';
import { isMissing } from '../languages/toolchain.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import type { SandboxNetwork } from '../sandbox/types.js';
import { SandboxGoneError, type SandboxAgentPort } from './agent-port.js';
import { refusedHere } from './served-sandbox.js';
import { LiveSandbox, SANDBOX_HOME, SANDBOX_USER, type SandboxPlan } from './live-sandbox.js';
import { runToEnd } from './sandbox-exec.js';
import { readSandboxFile, writeSandboxFile } from './sandbox-files.js';

/** What a face of a sandbox's agent (envd) needs to serve it. */
export interface SandboxAccess {
  agent: SandboxAgentPort;
  /** Required of every request to its envd when set (a secure sandbox). */
  accessToken: string | null;
  home: string;
  /** Whom its processes run as when a request names no one. */
  defaultUser: string;
  /** The python inside it (the system's, at the path the host resolved). */
  python: string;
}

/**
 * The long-lived sandboxes of one process (the worker process, the sandbox host): made, found
 * and killed here, at most `sandboxes.max` at once. An ended sandbox is remembered for a while,
 * so its id answers with why it ended rather than with nothing.
 */
export class Sandboxes {
  private readonly sandboxes = new Map<string, LiveSandbox>();
  /** Aborted when a sandbox ends: what waits on its agent (exec) stops waiting. */
  private readonly endings = new Map<string, AbortController>();
  private starting = 0;
  private closed = false;
  /** The code-interpreter contexts of these sandboxes (port 49999 and run_code). */
  readonly codeContexts = new CodeContexts();

  constructor(
    private readonly runtime: RunnerRuntime,
    /** Told when a sandbox has ended, so what serves it (envd) forgets it. */
    private readonly onEnded: (id: string) => void = () => undefined,
  ) {}

  /** Starts a sandbox; throws CodedError (validation, template.not_found, sandboxes.full, backend.*). */
  async create(request: SandboxCreateRequest): Promise<Sandbox> {
    const settings = this.runtime.config.sandboxes;
    if (this.closed) throw new CodedError(contractError('queue.closed', 'the service is shutting down'));
    if (this.liveCount() + this.starting >= settings.max) {
      throw new CodedError(contractError('sandboxes.full', `${settings.max} sandboxes are running, the most this server allows; kill one or retry later`, { max: settings.max }), {
        retry_after_seconds: 5,
      });
    }
    this.starting += 1;
    let id: string | undefined;
    try {
      const plan = await this.plan(request);
      id = plan.id;
      this.endings.set(id, new AbortController());
      const sandbox = await LiveSandbox.start(plan, (ended) => this.forgetLater(ended));
      this.sandboxes.set(sandbox.id, sandbox);
      return sandbox.describe(true);
    } catch (error) {
      if (id !== undefined) this.endings.delete(id);
      throw error;
    } finally {
      this.starting -= 1;
    }
  }

  describe(id: string): Sandbox {
    return this.find(id).describe();
  }

  /** Running and recently ended sandboxes. */
  list(): Sandbox[] {
    return [...this.sandboxes.values()].map((sandbox) => sandbox.describe());
  }

  setTimeout(id: string, timeoutSeconds: number): Sandbox {
    const sandbox = this.find(id);
    const max = this.runtime.config.sandboxes.maxTimeoutSeconds;
    if (timeoutSeconds > max) throw invalid(`timeout must be at most ${max} seconds, got ${timeoutSeconds}`, 'timeout');
    sandbox.setTimeout(timeoutSeconds * 1000);
    return sandbox.describe();
  }

  connect(id: string, timeoutSeconds?: number): Sandbox {
    const sandbox = this.find(id);
    if (!sandbox.running) throw sandbox.endedError();
    if (timeoutSeconds !== undefined && Date.now() + timeoutSeconds * 1000 > Date.parse(sandbox.describe().end_at)) this.setTimeout(id, timeoutSeconds);
    return sandbox.describe(true);
  }

  metrics(id: string): Promise<SandboxMetrics> {
    return this.find(id).metrics();
  }

  async kill(id: string): Promise<Sandbox> {
    const sandbox = this.find(id);
    await sandbox.end('killed');
    return sandbox.describe();
  }

  /** Runs a command to its end (sandbox-exec.ts), its timeout and output caps a snippet's. */
  exec(id: string, request: SandboxExecRequest): Promise<SandboxExecResult> {
    const limits = this.runtime.config.snippet;
    const timeoutSeconds = request.timeout ?? limits.defaultTimeoutSeconds;
    if (timeoutSeconds > limits.maxTimeoutSeconds) throw invalid(`timeout must be at most ${limits.maxTimeoutSeconds} seconds, got ${timeoutSeconds}`, 'timeout');
    return this.withAgent(id, (agent) =>
      runToEnd(
        id,
        agent,
        request,
        { timeoutMs: Math.round(timeoutSeconds * 1000), maxStdoutBytes: limits.maxStdoutBytes, maxStderrBytes: limits.maxStderrBytes },
        this.endings.get(id)!.signal,
      ),
    );
  }

  /** Runs a cell in the sandbox's code interpreter to its end (interpreter/run-cell.ts), its timeout and output caps a snippet's. */
  runCode(id: string, request: SandboxRunCodeRequest): Promise<SandboxRunCodeResult> {
    const limits = this.runtime.config.snippet;
    const timeoutSeconds = request.timeout ?? limits.defaultTimeoutSeconds;
    if (timeoutSeconds > limits.maxTimeoutSeconds) throw invalid(`timeout must be at most ${limits.maxTimeoutSeconds} seconds, got ${timeoutSeconds}`, 'timeout');
    const sandbox = this.find(id);
    const cellLimits = {
      timeoutMs: Math.round(timeoutSeconds * 1000),
      maxStdoutBytes: limits.maxStdoutBytes,
      maxStderrBytes: limits.maxStderrBytes,
      maxResultBytes: MAX_CELL_RESULT_BYTES,
    };
    return this.withAgent(id, async (agent) => {
      try {
        return await runCell(this.codeContexts, id, { agent, python: sandbox.python, home: SANDBOX_HOME }, request, cellLimits, this.endings.get(id)!.signal);
      } catch (error) {
        if (error instanceof ContextError) throw contextRefusal(error);
        if (error instanceof BridgeLost && !sandbox.running) throw new SandboxGoneError(error.message);
        throw error;
      }
    });
  }

  /** A regular file's bytes; `path` absolute or relative to the sandbox user's home. */
  readFile(id: string, path: string): Promise<Buffer> {
    return this.withAgent(id, (agent) => readSandboxFile(agent, filePath(path), this.runtime.config.sandboxes.maxFileBytes));
  }

  /** Writes a file (parents made, a file there replaced). */
  writeFile(id: string, path: string, content: Buffer): Promise<SandboxFileWritten> {
    return this.withAgent(id, (agent) => writeSandboxFile(agent, filePath(path), content, this.runtime.config.sandboxes.maxFileBytes));
  }

  /** A running sandbox's agent and what guards it, or undefined when there is none by that id. */
  access(id: string): SandboxAccess | undefined {
    const sandbox = this.sandboxes.get(id);
    if (!sandbox?.running) return undefined;
    return { agent: sandbox.agent, accessToken: sandbox.accessToken, home: SANDBOX_HOME, defaultUser: SANDBOX_USER, python: sandbox.python };
  }

  /** Kills every sandbox (the process is stopping); new ones are refused. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.sandboxes.values()].map((sandbox) => sandbox.end('the server stopped')));
  }

  private liveCount(): number {
    let live = 0;
    for (const sandbox of this.sandboxes.values()) if (sandbox.running) live += 1;
    return live;
  }

  private find(id: string): LiveSandbox {
    const found = this.sandboxes.get(id);
    if (!found) throw new CodedError(contractError('sandbox.not_found', `no sandbox ${JSON.stringify(id)}`));
    return found;
  }

  /** `work` on a running sandbox's agent; the sandbox ending under it answers sandbox.ended. */
  private async withAgent<T>(id: string, work: (agent: SandboxAgentPort) => Promise<T>): Promise<T> {
    const sandbox = this.find(id);
    if (!sandbox.running) throw sandbox.endedError();
    try {
      return await work(sandbox.agent);
    } catch (error) {
      if (!(error instanceof SandboxGoneError)) throw error;
      throw sandbox.running ? new CodedError(contractError('sandbox.ended', error.message)) : sandbox.endedError();
    }
  }

  private forgetLater(sandbox: LiveSandbox): void {
    this.endings.get(sandbox.id)?.abort();
    this.endings.delete(sandbox.id);
    this.codeContexts.sandboxEnded(sandbox.id);
    this.onEnded(sandbox.id);
    setTimeout(() => this.sandboxes.delete(sandbox.id), this.runtime.config.sandboxes.endedRetentionSeconds * 1000).unref();
  }

  private async plan(request: SandboxCreateRequest): Promise<SandboxPlan> {
    const { config } = this.runtime;
    const settings = config.sandboxes;
    // `base` is the host's system, as E2B's base image gives; the others are named in the configuration.
    const template = request.template ?? 'base';
    const named = template === 'base' ? {} : Object.hasOwn(settings.templates, template) ? settings.templates[template]! : null;
    if (named === null) {
      const known = ['base', ...Object.keys(settings.templates)];
      throw new CodedError(contractError('template.not_found', `no template ${JSON.stringify(template)}: this server has ${known.join(', ')}`, { template }));
    }
    const timeoutSeconds = request.timeout_seconds ?? settings.defaultTimeoutSeconds;
    if (timeoutSeconds > settings.maxTimeoutSeconds) throw invalid(`timeout must be at most ${settings.maxTimeoutSeconds} seconds, got ${timeoutSeconds}`, 'timeout');
    // The operator's word on the internet wins: E2B's SDK asks for it on every create by default.
    const allowed = named.allowInternetAccess ?? settings.allowInternetAccess;
    const internet = (request.allow_internet_access ?? allowed) && allowed && config.runJob.allowNetwork;
    // Egress to anywhere but the host, as a run job's "allow" (runner/network-admission.ts).
    const network: SandboxNetwork = internet ? { allow: null } : 'none';
    let backend;
    try {
      backend = this.runtime.backends.get(request.backend?.kind ?? named.backend);
    } catch (error) {
      throw refusedHere(error);
    }
    const toolchain = await this.runtime.toolchains.get(python);
    if (isMissing(toolchain)) throw new CodedError(contractError('backend.unavailable', `sandboxes need python here: ${toolchain.message}`), { http_status: 503 });
    return {
      id: randomId(),
      template,
      backend,
      python: { executable: toolchain.executable, mounts: toolchain.mounts },
      envVars: { ...named.envVars, ...request.env_vars },
      metadata: request.metadata ?? {},
      network,
      timeoutMs: timeoutSeconds * 1000,
      accessToken: request.secure === false ? null : randomBytes(24).toString('base64url'),
      memoryBytes: named.memoryBytes ?? settings.memoryBytes,
      maxProcesses: settings.maxProcesses,
      maxOpenFiles: config.runJob.maxOpenFiles,
      cpuCores: named.cpuCores ?? config.runJob.cpuCores,
      home: SANDBOX_HOME,
      homeBytes: settings.homeBytes,
      maxFileBytes: settings.maxFileBytes,
      startTimeoutSeconds: settings.startTimeoutSeconds,
      maxLifetimeMs: settings.maxTimeoutSeconds * 1000,
    };
  }
}

/** 24 characters of [0-9a-z], each uniform (about 124 bits): a sandbox's id is also the name its envd is reached by. */
function randomId(): string {
  const alphabet = '0123456789abcdefghijklmnopqrstuvwxyz';
  return Array.from({ length: 24 }, () => alphabet[randomInt(alphabet.length)]).join('');
}

/** A refusal of the code interpreter (E2B's statuses) as our contract's error. */
function contextRefusal(error: ContextError): CodedError {
  const code = (
    { 400: 'validation.invalid_request', 404: 'sandbox.context_not_found', 429: 'sandbox.contexts_full', 500: 'sandbox.interpreter_failed', 502: 'sandbox.ended' } as const
  )[error.status];
  return new CodedError(contractError(code, error.message));
}

function filePath(path: string): string {
  if (path === '') throw invalid('path: give the file’s path, absolute or relative to the home directory', 'path');
  return path;
}

function invalid(message: string, field: string): CodedError {
  return new CodedError(contractError('validation.invalid_request', message, { field }));
}
