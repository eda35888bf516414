import { randomBytes } from 'node:crypto';
import { CodedError, contractError, invalidField, type ContractError } from '../contract/errors.js';
import type { Session, SessionCreateRequest, SessionExecRequest, SessionExecResult, SessionFileWritten } from '../contract/session.js';
import { findLanguage } from '../languages/catalog.js';
import { node } from '../languages/node.js';
import { python } from '../languages/python.js';
import type { LanguageDefinition } from '../languages/language.js';
import { isMissing, type Toolchain } from '../languages/toolchain.js';
import { checkCommand } from '../policy/command.js';
import type { ExecPolicy } from '../policy/exec-rules.js';
import { findShellUse } from '../policy/shell-rule.js';
import { admitNetwork } from '../runner/network-admission.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import { snippetTimeout } from '../runner/snippet.js';
import { refusedHere } from '../sandboxes/served-sandbox.js';
import { LiveSession, SESSION_WORK_DIR, type SessionPlan } from './live-session.js';
import { sessionNotFound } from './session-host.js';

/**
 * The live sessions of one process (the service's front door, or `agent-runner mcp`): made,
 * found, served and ended here, capped at `sessions.max`. An ended session is remembered for a
 * while, so its id answers with why it ended rather than with nothing.
 */
export class Sessions {
  private readonly sessions = new Map<string, { session: LiveSession; policy: ExecPolicy }>();
  private starting = 0;
  private closed = false;

  constructor(private readonly runtime: RunnerRuntime) {}

  /**
   * Starts a session for the API key named `apiKey` (undefined: the service token), which it
   * then belongs to; throws CodedError (validation, sessions.full, backend.unavailable, backend.setup_failed).
   */
  async create(request: SessionCreateRequest, apiKey?: string): Promise<Session> {
    const settings = this.runtime.config.sessions;
    if (this.closed) throw new CodedError(contractError('queue.closed', 'the service is shutting down'));
    if (this.liveCount() + this.starting >= settings.max) {
      throw new CodedError(
        contractError('sessions.full', `${settings.max} sessions are live, the most this server allows; end one (DELETE /v1/sessions/ID) or retry later`, { max: settings.max }),
        {
          retry_after_seconds: 5,
        },
      );
    }
    this.starting += 1;
    try {
      const plan = await this.plan(request, apiKey);
      const session = await LiveSession.start(plan, (ended) => this.forgetLater(ended));
      this.sessions.set(session.id, { session, policy: plan.policy });
      return session.describe();
    } finally {
      this.starting -= 1;
    }
  }

  describe(id: string): Session {
    return this.find(id).session.describe();
  }

  list(): Session[] {
    return [...this.sessions.values()].map(({ session }) => session.describe());
  }

  /** A cell or a command; a command is first checked against the session's policy, as a run job's is. */
  async exec(id: string, request: SessionExecRequest): Promise<SessionExecResult> {
    const { session, policy } = this.find(id);
    if ('code' in request) {
      if (session.lang === null) throw invalidField('code: this session has no interpreter (it was made without lang); run commands with argv', 'code');
      if (request.lang !== undefined && findLanguage(request.lang)?.name !== session.lang) {
        throw invalidField(`lang: this session runs ${session.lang} cells, not ${request.lang}`, 'lang');
      }
    } else {
      const denied = await policyDecision(request.argv, policy);
      if (denied) throw new CodedError(denied, { http_status: 403 });
    }
    const timeout = snippetTimeout(this.runtime.config.snippet, request.timeout);
    if (timeout.problem !== undefined) throw invalidField(timeout.problem, 'timeout');
    return session.exec(request, { timeoutMs: Math.round(timeout.seconds * 1000) });
  }

  writeFile(id: string, path: string, content: Buffer): Promise<SessionFileWritten> {
    return this.find(id).session.writeFile(path, content);
  }

  readFile(id: string, path: string): Promise<Buffer> {
    return this.find(id).session.readFile(path);
  }

  async remove(id: string): Promise<Session> {
    const { session } = this.find(id);
    await session.end('deleted');
    return session.describe();
  }

  /** Ends every session (the process is stopping); new ones are refused. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.sessions.values()].map(({ session }) => session.end('the server stopped')));
  }

  private liveCount(): number {
    let live = 0;
    for (const { session } of this.sessions.values()) if (session.running) live += 1;
    return live;
  }

  private find(id: string): { session: LiveSession; policy: ExecPolicy } {
    const found = this.sessions.get(id);
    if (!found) throw sessionNotFound(id);
    return found;
  }

  private forgetLater(session: LiveSession): void {
    setTimeout(() => this.sessions.delete(session.id), this.runtime.config.sessions.endedRetentionSeconds * 1000).unref();
  }

  private async toolchain(language: LanguageDefinition): Promise<Toolchain> {
    const toolchain = await this.runtime.toolchains.get(language);
    if (isMissing(toolchain)) throw new CodedError(contractError('backend.unavailable', `sessions need ${language.name} here: ${toolchain.message}`), { http_status: 503 });
    return toolchain;
  }

  private async plan(request: SessionCreateRequest, apiKey: string | undefined): Promise<SessionPlan & { policy: ExecPolicy }> {
    const { config } = this.runtime;
    const settings = config.sessions;
    const language = request.lang === undefined ? null : findLanguage(request.lang);
    if (language === undefined) throw invalidField(`lang: unsupported language ${JSON.stringify(request.lang)}`, 'lang');
    if (language && language !== python && language !== node)
      throw invalidField(`lang: a session keeps a live interpreter for python and node only, not ${language.name}; omit lang for a session of commands`, 'lang');
    const allowShell = request.policy?.allow_shell ?? language !== null;
    if (language && !allowShell) throw invalidField('policy.allow_shell: cells are inline interpreter code, so a session with lang needs allow_shell', 'policy.allow_shell');
    const rules = request.policy?.allowed_commands;
    if (rules?.some((rule) => typeof rule !== 'string'))
      throw invalidField('policy.allowed_commands: sessions take command names only, not pinned path or sha256 rules', 'policy.allowed_commands');
    const policy: ExecPolicy = { allowed_commands: rules ?? null, allow_shell: allowShell };
    const memoryBytes = request.limits?.memory_bytes ?? settings.memoryBytes;
    if (memoryBytes > settings.maxMemoryBytes) throw invalidField(`limits.memory_bytes must be at most ${settings.maxMemoryBytes}, got ${memoryBytes}`, 'limits.memory_bytes');
    const maxProcesses = request.limits?.max_processes ?? settings.maxProcesses;
    if (maxProcesses > settings.maxProcesses) throw invalidField(`limits.max_processes must be at most ${settings.maxProcesses}, got ${maxProcesses}`, 'limits.max_processes');
    const idleTimeoutSeconds = request.idle_timeout_seconds ?? settings.idleTimeoutSeconds;
    if (idleTimeoutSeconds > settings.maxIdleTimeoutSeconds) {
      throw invalidField(`idle_timeout_seconds must be at most ${settings.maxIdleTimeoutSeconds}, got ${idleTimeoutSeconds}`, 'idle_timeout_seconds');
    }
    const network = admitNetwork(request.network ?? 'none', config.runJob.allowNetwork, 'network');
    if (network !== 'none' && 'error' in network) throw new CodedError(network.error);
    let backend;
    try {
      backend = this.runtime.backends.get(request.backend?.kind);
    } catch (error) {
      throw refusedHere(error);
    }
    // The agent and the python kernel run on the system's python; a node session's kernel on its node.
    const agentPython = await this.toolchain(python);
    const toolchain = language === null || language === python ? agentPython : await this.toolchain(language);
    const mounts = [...new Set([...agentPython.mounts, ...toolchain.mounts])];
    const id = `ses_${randomBytes(16).toString('hex')}`;
    return {
      id,
      lang: language?.name ?? null,
      kernel: language === null ? null : language === python ? 'python' : 'javascript',
      interpreter: toolchain.executable,
      // `Python 3.11.2`, `v20.19.0`: the number is the version.
      version: language === null ? null : (toolchain.version.match(/\d+(\.\d+)+/)?.[0] ?? toolchain.version),
      policy,
      sandbox: {
        id,
        template: 'session',
        backend,
        python: { executable: agentPython.executable, mounts },
        envVars: {},
        metadata: {},
        network,
        timeoutMs: settings.lifetimeSeconds * 1000,
        accessToken: null,
        // A session's sandbox serves no port of its own.
        publicTraffic: false,
        maskRequestHost: null,
        memoryBytes,
        maxProcesses,
        maxOpenFiles: config.runJob.maxOpenFiles,
        cpuCores: config.runJob.cpuCores,
        home: SESSION_WORK_DIR,
        homeBytes: settings.workDirBytes,
        maxFileBytes: settings.maxFileBytes,
        startTimeoutSeconds: settings.startTimeoutSeconds,
        heartbeatMs: config.sandboxes.heartbeatSeconds * 1000,
        maxLifetimeMs: settings.lifetimeSeconds * 1000,
        execGuard: {
          policy,
          programs: [...new Set([agentPython.executable, toolchain.executable])],
          trees: mounts.filter((mount) => !mount.writable).map((mount) => mount.sandbox),
        },
        ...(apiKey !== undefined && { apiKey }),
      },
      idleTimeoutSeconds,
      outputBytes: Math.max(config.snippet.maxStdoutBytes, config.snippet.maxStderrBytes),
    };
  }
}

/**
 * The run-job rules for a command, read from its argv: the early, explainable refusal (a shell
 * or inline code needs allow_shell; allowed_commands by name). What holds whatever the argv
 * is enforced inside the session's sandbox (LiveSession: no shells, the exec guard's rules).
 */
async function policyDecision(argv: readonly string[], policy: ExecPolicy): Promise<ContractError | null> {
  const shell = policy.allow_shell ? null : findShellUse(argv);
  if (shell) return contractError('policy.shell_denied', `${shell.reason}: this session's policy has allow_shell false`, { program: shell.program });
  const decision = await checkCommand(argv[0]!, policy.allowed_commands ?? undefined, null);
  return decision.allowed ? null : contractError('policy.command_denied', decision.message, decision.details);
}
