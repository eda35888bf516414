import { randomUUID } from 'node:crypto';
import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import { SNIPPET_EXIT, SnippetRequestSchema, type SnippetResponse } from '../contract/snippet.js';
import { validate } from '../contract/validate.js';
import { findLanguage } from '../languages/catalog.js';
import type { Invocation, JobPaths, LanguageDefinition } from '../languages/language.js';
import { isMissing, type Toolchain } from '../languages/toolchain.js';
import { CappedCapture } from '../sandbox/output-capture.js';
import { SandboxUnavailableError, type Mount, type SandboxLimits, type SandboxOutcome } from '../sandbox/types.js';
import { RunnerRuntime } from './runtime.js';
import { JobStaging } from './staging.js';

export interface SnippetOptions {
  runtime?: RunnerRuntime;
  /** Aborting kills the job as a timeout would. */
  signal?: AbortSignal;
}

/** The runner itself could not run the job (no sandbox here): distinct from the program failing. */
const EXIT_SANDBOX_UNAVAILABLE = 126;
const TIMEOUT_NOTE = '\nExecution timed out';

/**
 * Runs one snippet request in the sandbox. Never throws: every failure is a response.
 */
export async function executeSnippet(request: unknown, options: SnippetOptions = {}): Promise<SnippetResponse> {
  const runtime = options.runtime ?? RunnerRuntime.shared();
  const limits = runtime.config.snippet;
  const traceId = traceIdOf(request);

  const checked = validate(SnippetRequestSchema, request);
  if (!checked.ok) return invalidSnippetResponse(traceId, checked.message);
  const { lang, code } = checked.value;
  const timeoutSeconds = checked.value.timeout ?? limits.defaultTimeoutSeconds;
  if (timeoutSeconds > limits.maxTimeoutSeconds) {
    return invalidSnippetResponse(traceId, `timeout must be at most ${limits.maxTimeoutSeconds} seconds, got ${timeoutSeconds}`);
  }

  const language = findLanguage(lang);
  if (!language) return failure(traceId, SNIPPET_EXIT.unsupported, `unsupported language: ${lang}`);
  const toolchain = await runtime.toolchains.get(language);
  if (isMissing(toolchain)) return failure(traceId, SNIPPET_EXIT.unsupported, toolchain.message);

  let staging: JobStaging | undefined;
  try {
    staging = await JobStaging.create(runtime.stagingDir);
    const job = new SnippetJob(runtime, language, toolchain, staging, options.signal);
    return { trace_id: traceId, ...(await job.run(code, timeoutSeconds * 1000)) };
  } catch (error) {
    if (error instanceof SandboxUnavailableError) return failure(traceId, EXIT_SANDBOX_UNAVAILABLE, `sandbox unavailable: ${error.message}`);
    return failure(traceId, 1, `internal error: ${(error as Error).message}`);
  } finally {
    await staging?.dispose();
  }
}

type Outcome = Omit<SnippetResponse, 'trace_id'>;

class SnippetJob {
  private readonly paths: JobPaths;

  constructor(
    private readonly runtime: RunnerRuntime,
    private readonly language: LanguageDefinition,
    private readonly toolchain: Toolchain,
    private readonly staging: JobStaging,
    private readonly signal: AbortSignal | undefined,
  ) {
    const dir = `/tmp/job-${staging.id}`;
    this.paths = { dir, source: join(dir, language.sourceFile), program: join(dir, 'program'), compileOutput: join(dir, 'out', 'program') };
  }

  async run(code: string, timeoutMs: number): Promise<Outcome> {
    const sourceMount: Mount = { host: await this.staging.writeFile(this.language.sourceFile, code), sandbox: this.paths.source, writable: false };
    const mounts = [...this.toolchain.mounts, sourceMount];
    if (this.language.compile) {
      const built = await this.compiled(code, this.language.compile(this.toolchain, this.paths), mounts);
      if ('failed' in built) return built.failed;
      mounts.push({ host: built.program, sandbox: this.paths.program, writable: false });
    }
    const limits = this.runtime.config.snippet;
    const invocation = this.language.run(this.toolchain, this.paths, { memoryBytes: limits.memoryBytes });
    const stdout = new CappedCapture(limits.maxStdoutBytes);
    const stderr = new CappedCapture(limits.maxStderrBytes);
    const outcome = await this.sandboxed(invocation, mounts, stdout, stderr, {
      timeoutMs,
      memoryBytes: limits.memoryBytes,
      memoryMechanism: this.language.memoryMechanism,
      maxProcesses: limits.maxProcesses,
    });
    return this.describe(outcome, stdout, stderr, limits.memoryBytes);
  }

  /** Compiles unless the cache has this exact program; compiler output goes to stderr on failure. */
  private async compiled(code: string, invocation: Invocation, mounts: Mount[]): Promise<{ program: string } | { failed: Outcome }> {
    const cache = this.runtime.compileCache;
    const key = cache.key(this.language.name, this.toolchain.version, code);
    const hit = await cache.lookup(key);
    if (hit) return { program: hit };
    return cache.once(key, async () => {
      const limits = this.runtime.config.snippet;
      const outDir = await this.staging.makeDir('out');
      const output = new CappedCapture(limits.maxStderrBytes);
      const outcome = await this.sandboxed(invocation, [...mounts, { host: outDir, sandbox: join(this.paths.dir, 'out'), writable: true }], output, output, {
        timeoutMs: limits.compileTimeoutSeconds * 1000,
        memoryBytes: limits.compileMemoryBytes,
        memoryMechanism: 'cgroup',
        maxProcesses: limits.compileMaxProcesses,
      });
      if (outcome.timedOut || outcome.aborted || outcome.exitCode !== 0) {
        const reason = outcome.timedOut ? `\ncompilation timed out after ${limits.compileTimeoutSeconds} s` : outcome.oomKilled ? '\ncompilation ran out of memory' : '';
        return { failed: { stdout: '', stderr: output.text() + reason, exit_code: outcome.timedOut ? SNIPPET_EXIT.timedOut : 1, error: 'compilation failed' } };
      }
      return { program: await cache.adopt(key, join(outDir, 'program')) };
    });
  }

  private sandboxed(
    invocation: Invocation,
    mounts: Mount[],
    stdout: CappedCapture,
    stderr: CappedCapture,
    limits: Pick<SandboxLimits, 'timeoutMs' | 'memoryBytes' | 'memoryMechanism' | 'maxProcesses'>,
  ): Promise<SandboxOutcome> {
    const config = this.runtime.config.snippet;
    return this.runtime.backend.run({
      argv: invocation.argv,
      cwd: this.paths.dir,
      env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/tmp', LANG: 'C.UTF-8', ...invocation.env },
      mounts,
      network: 'none',
      limits: { ...limits, maxOpenFiles: config.maxOpenFiles, maxFileBytes: config.maxFileBytes },
      stdout,
      stderr,
      ...(this.signal ? { signal: this.signal } : {}),
    });
  }

  private describe(outcome: SandboxOutcome, stdout: CappedCapture, stderr: CappedCapture, memoryBytes: number): Outcome {
    for (const [stream, name] of [[stdout, 'stdout'], [stderr, 'stderr']] as const) {
      if (stream.truncated) stream.appendNote(`\n[${name} truncated: ${stream.observedBytes} bytes written, the first ${stream.bytes().length} kept]`);
    }
    if (outcome.timedOut || outcome.aborted) {
      stderr.appendNote(outcome.timedOut ? TIMEOUT_NOTE : '\nExecution canceled');
      return { stdout: stdout.text(), stderr: stderr.text(), exit_code: SNIPPET_EXIT.timedOut, error: '' };
    }
    if (outcome.oomKilled) stderr.appendNote(`\nMemoryError: killed after exceeding the sandbox memory limit of ${Math.round(memoryBytes / 1024 / 1024)} MiB`);
    const exitCode = outcome.exitCode ?? 128 + signalNumber(outcome.signal);
    return { stdout: stdout.text(), stderr: stderr.text(), exit_code: exitCode, error: '' };
  }
}

function signalNumber(signal: NodeJS.Signals | null): number {
  return signal ? osConstants.signals[signal] : 0;
}

function traceIdOf(request: unknown): string {
  const given = request !== null && typeof request === 'object' ? (request as Record<string, unknown>).trace_id : undefined;
  return typeof given === 'string' && given.length > 0 && given.length <= 256 ? given : `tr-${randomUUID()}`;
}

/** The response to a request that cannot be run as given (exit_code 2, the field named). */
export function invalidSnippetResponse(traceId: string | undefined, message: string): SnippetResponse {
  return { trace_id: traceId ?? traceIdOf(undefined), stdout: '', stderr: `invalid request: ${message}`, exit_code: SNIPPET_EXIT.invalidRequest, error: `invalid request: ${message}` };
}

function failure(traceId: string, exitCode: number, message: string): SnippetResponse {
  return { trace_id: traceId, stdout: '', stderr: message, exit_code: exitCode, error: message };
}
