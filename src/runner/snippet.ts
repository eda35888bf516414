import { randomUUID } from 'node:crypto';
import { availableParallelism, constants as osConstants } from 'node:os';
import { join } from 'node:path';
import { argvProblem } from '../contract/command-limits.js';
import { SNIPPET_EXIT, SNIPPET_TIMEOUT_NOTE, SnippetRequestSchema, type SnippetRequest, type SnippetResponse } from '../contract/snippet.js';
import { usageOf } from '../contract/usage.js';
import { validate } from '../contract/validate.js';
import type { SnippetLimits } from '../config/schema.js';
import { findLanguage, versionMatches, versionNumber } from '../languages/catalog.js';
import type { Invocation, JobPaths, LanguageDefinition } from '../languages/language.js';
import type { CompiledProgram } from '../languages/compile-cache.js';
import { isMissing, type Toolchain } from '../languages/toolchain.js';
import { CappedCapture } from '../isolation/output-capture.js';
import { SandboxUnavailableError, type Mount, type ResourceLimits, type SandboxBackend, type SandboxIO, type SandboxOutcome } from '../isolation/types.js';
import { withRuntime, type RunnerRuntime } from './runtime.js';
import { interruptionOf } from './outcome.js';
import { runStaged, type JobFile } from './staged-run.js';
import { JobStaging } from './staging.js';

/**
 * The timeout, in seconds, that a snippet runs with, and a sandbox's command or cell and a
 * session's too (their limits are a snippet's): the default where none is asked; above the
 * maximum, the problem to refuse it with.
 */
export function snippetTimeout(limits: SnippetLimits, asked: number | undefined): { seconds: number; problem?: string } {
  const seconds = asked ?? limits.defaultTimeoutSeconds;
  return seconds > limits.maxTimeoutSeconds ? { seconds, problem: `timeout must be at most ${limits.maxTimeoutSeconds} seconds, got ${seconds}` } : { seconds };
}

export interface SnippetOptions {
  /** The runtime to run on; without one, a runtime made for this call from the environment's configuration (runtime.ts: withRuntime). */
  runtime?: RunnerRuntime;
  /** Aborting kills the job as a timeout would. */
  signal?: AbortSignal;
}

/** The runner itself could not run the job (no sandbox here): distinct from the program failing. */
const EXIT_SANDBOX_UNAVAILABLE = 126;
/** Every sandbox has its own /tmp, so one fixed job dir serves all (and lets sandboxes be pre-started). */
const JOB_DIR = '/tmp/job';
const PATHS: JobPaths = { dir: JOB_DIR, source: '', program: join(JOB_DIR, 'program'), compileOutput: join(JOB_DIR, 'out', 'program') };

/**
 * Runs one snippet request in the sandbox. Never throws: every failure is a response.
 */
export function executeSnippet(request: unknown, options: SnippetOptions = {}): Promise<SnippetResponse> {
  return withRuntime(options.runtime, (runtime) => executeOn(runtime, request, options.signal));
}

async function executeOn(runtime: RunnerRuntime, request: unknown, signal: AbortSignal | undefined): Promise<SnippetResponse> {
  const limits = runtime.config.snippet;
  const traceId = traceIdOf(request);

  const checked = validate(SnippetRequestSchema, request);
  if (!checked.ok) return invalidSnippetResponse(traceId, checked.message);
  const { lang, code } = checked.value;
  const asked = askedLimits(checked.value, limits);
  if (typeof asked === 'string') return invalidSnippetResponse(traceId, asked);
  // The arguments follow the interpreter and the source on the command line: bounded as any command's.
  const argsProblem = argvProblem(checked.value.args ?? [], 'args');
  if (argsProblem !== undefined) return invalidSnippetResponse(traceId, argsProblem);
  let backend: SandboxBackend;
  try {
    backend = runtime.backends.get(checked.value.backend?.kind);
  } catch (error) {
    return failure(traceId, EXIT_SANDBOX_UNAVAILABLE, `sandbox unavailable: ${(error as Error).message}`);
  }
  const timeout = snippetTimeout(limits, checked.value.timeout);
  if (timeout.problem !== undefined) return invalidSnippetResponse(traceId, timeout.problem);
  const timeoutSeconds = timeout.seconds;

  const language = findLanguage(lang);
  if (!language) return failure(traceId, SNIPPET_EXIT.unsupported, `unsupported language: ${lang}`);
  const toolchain = await runtime.toolchains.get(language);
  if (isMissing(toolchain)) return failure(traceId, SNIPPET_EXIT.unsupported, toolchain.message);
  const { version } = checked.value;
  if (version !== undefined && !versionMatches(versionNumber(toolchain.version), version)) {
    return failure(traceId, SNIPPET_EXIT.unsupported, `unsupported version: ${language.name} ${version} (this runner has ${versionNumber(toolchain.version)})`);
  }
  const files = extraFiles(checked.value.files ?? [], language.sourceFile(code));
  if (typeof files === 'string') return invalidSnippetResponse(traceId, files);

  try {
    const job = new SnippetJob(runtime, backend, language, toolchain, signal);
    const { stdin, args = [] } = checked.value;
    return { trace_id: traceId, ...(await job.run(code, { timeoutMs: timeoutSeconds * 1000, ...asked, files, args, ...(stdin === undefined ? {} : { stdin }) })) };
  } catch (error) {
    if (error instanceof SandboxUnavailableError) return failure(traceId, EXIT_SANDBOX_UNAVAILABLE, `sandbox unavailable: ${error.message}`);
    return failure(traceId, 1, `internal error: ${(error as Error).message}`);
  }
}

type Outcome = Omit<SnippetResponse, 'trace_id'>;
type InlineFile = Extract<JobFile, { content: string | Buffer }>;

/** What one snippet asked for, within the server's limits. */
interface SnippetRun {
  timeoutMs: number;
  memoryBytes: number;
  outputBytes: { stdout: number; stderr: number };
  files: InlineFile[];
  args: string[];
  stdin?: string;
}

/** The request's own limits, checked against the server's (which are also their defaults). */
function askedLimits(request: SnippetRequest, limits: SnippetLimits): Pick<SnippetRun, 'memoryBytes' | 'outputBytes'> | string {
  const memoryBytes = request.memory_bytes ?? limits.memoryBytes;
  if (memoryBytes > limits.memoryBytes) return `memory_bytes must be at most ${limits.memoryBytes}, got ${memoryBytes}`;
  const maxOutput = Math.max(limits.maxStdoutBytes, limits.maxStderrBytes);
  if ((request.output_bytes ?? 0) > maxOutput) return `output_bytes must be at most ${maxOutput}, got ${request.output_bytes}`;
  const capped = (limit: number) => Math.min(limit, request.output_bytes ?? limit);
  return { memoryBytes, outputBytes: { stdout: capped(limits.maxStdoutBytes), stderr: capped(limits.maxStderrBytes) } };
}

/** The request's extra files, beside the source; a name the job dir already uses is refused. */
function extraFiles(files: NonNullable<SnippetRequest['files']>, sourceFile: string): InlineFile[] | string {
  const taken = new Set([sourceFile, 'program', 'out']);
  const staged: InlineFile[] = [];
  for (const file of files) {
    if (taken.has(file.name)) return `files: ${file.name} is already used by the job (the source is ${sourceFile}); names must be unique`;
    taken.add(file.name);
    const content = file.encoding === 'base64' ? Buffer.from(file.content, 'base64') : file.content;
    staged.push({ name: file.name, sandboxPath: join(JOB_DIR, file.name), executable: false, content });
  }
  return staged;
}

class SnippetJob {
  constructor(
    private readonly runtime: RunnerRuntime,
    private readonly backend: SandboxBackend,
    private readonly language: LanguageDefinition,
    private readonly toolchain: Toolchain,
    private readonly signal: AbortSignal | undefined,
  ) {}

  async run(code: string, request: SnippetRun): Promise<Outcome> {
    const sourceFile = this.language.sourceFile(code);
    const paths: JobPaths = { ...PATHS, source: join(JOB_DIR, sourceFile) };
    const source: JobFile = { name: sourceFile, sandboxPath: paths.source, executable: false, content: code };
    const files: JobFile[] = [source, ...request.files];
    const limits = this.runtime.config.snippet;
    let compileOutput = '';
    if (this.language.compile) {
      const input = { code, files: request.files.map((file) => file.name), memoryBytes: limits.compileMemoryBytes };
      const built = await this.compiled(code, this.language.compile(this.toolchain, paths, input), source, request.files);
      if ('failed' in built) return built.failed;
      files.push({ name: 'program', sandboxPath: paths.program, executable: true, hostSource: built.program });
      compileOutput = built.notes;
    }
    const { memoryBytes } = request;
    const stdout = new CappedCapture(request.outputBytes.stdout);
    const stderr = new CappedCapture(request.outputBytes.stderr);
    // A compiled program runs without its compiler: the toolchain is mounted only to compile,
    // and the run gets what its runtime needs (java's JVM, typescript's node), if anything.
    const mounts = this.language.compile ? (this.toolchain.runtime?.mounts ?? []) : this.toolchain.mounts;
    const resources = { memoryBytes, memoryMechanism: this.language.memoryMechanism, maxProcesses: limits.maxProcesses };
    const io = { timeoutMs: request.timeoutMs, stdout, stderr };
    const waiting = request.files.length === 0 ? this.language.waiting?.(this.toolchain, { memoryBytes }) : undefined;
    let outcome: SandboxOutcome;
    if (waiting) {
      // The interpreter is already up in a pre-started sandbox (every snippet of the language
      // shares this template); it reads the program, then the program its stdin, from the pipe.
      const header = JSON.stringify({ source: paths.source, bytes: Buffer.byteLength(code), args: request.args });
      const stdin = Buffer.concat([Buffer.from(`${header}\n`), Buffer.from(code), Buffer.from(request.stdin ?? '')]);
      outcome = await this.sandboxed(this.backend, waiting, mounts, [], { ...io, stdin }, resources, true);
    } else {
      const invocation = this.language.run(this.toolchain, paths, { memoryBytes });
      invocation.argv.push(...request.args);
      outcome = await this.sandboxed(this.backend, invocation, mounts, files, { ...io, ...(request.stdin === undefined ? {} : { stdin: request.stdin }) }, resources);
    }
    const described = this.describe(outcome, stdout, stderr, memoryBytes);
    return compileOutput === '' ? described : { ...described, compile_output: compileOutput };
  }

  /** Compiles unless the cache has this exact program; compiler output goes to stderr on failure, to compile_output on success. */
  private async compiled(code: string, invocation: Invocation, source: JobFile, extras: readonly InlineFile[]): Promise<CompiledProgram | { failed: Outcome }> {
    const cache = this.runtime.compileCache;
    const key = cache.key(this.language.name, this.toolchain.version, code, extras);
    const hit = await cache.lookup(key);
    if (hit) return hit;
    return cache.once(key, async () => {
      const limits = this.runtime.config.snippet;
      const staging = await JobStaging.create(this.runtime.stagingDir);
      try {
        const outDir = await staging.makeDir('out');
        const output = new CappedCapture(limits.maxStderrBytes);
        const outMount: Mount = { host: outDir, sandbox: join(JOB_DIR, 'out'), writable: true };
        const outcome = await this.sandboxed(
          this.compileBackend(),
          invocation,
          [...this.toolchain.mounts, outMount],
          [source, ...extras],
          { timeoutMs: limits.compileTimeoutSeconds * 1000, stdout: output, stderr: output },
          {
            memoryBytes: limits.compileMemoryBytes,
            memoryMechanism: 'cgroup',
            maxProcesses: limits.compileMaxProcesses,
            cpuCores: availableParallelism(),
          },
        );
        if (outcome.timedOut || outcome.aborted || outcome.exitCode !== 0) {
          const reason = outcome.timedOut ? `\ncompilation timed out after ${limits.compileTimeoutSeconds} s` : outcome.oomKilled ? '\ncompilation ran out of memory' : '';
          return { failed: { stdout: '', stderr: output.text() + reason, exit_code: outcome.timedOut ? SNIPPET_EXIT.timedOut : 1, error: 'compilation failed' } };
        }
        return await cache.adopt(key, join(outDir, 'program'), output.text());
      } finally {
        await staging.dispose();
      }
    });
  }

  /**
   * The compiler writes its program into a host directory bound into its sandbox. A backend
   * whose sandboxes have no host directories (a microVM) runs the program it is given, and
   * the compiler (the toolchain's code, on the job's source) runs on local_process.
   */
  private compileBackend(): SandboxBackend {
    return this.backend.capabilities.host_work_dir ? this.backend : this.runtime.backends.get('local_process');
  }

  private sandboxed(
    backend: SandboxBackend,
    invocation: Invocation,
    mounts: readonly Mount[],
    files: JobFile[],
    io: Omit<SandboxIO, 'signal'>,
    limits: Pick<ResourceLimits, 'memoryBytes' | 'memoryMechanism' | 'maxProcesses' | 'cpuCores'>,
    startsEarly = false,
  ): Promise<SandboxOutcome> {
    const config = this.runtime.config.snippet;
    const template = {
      profile: 'snippet',
      argv: invocation.argv,
      // A waiting interpreter makes the job dir itself when its program arrives (no staged file makes it).
      cwd: startsEarly ? '/tmp' : JOB_DIR,
      env: invocation.env,
      mounts,
      network: 'none',
      limits: { cpuCores: config.cpuCores, ...limits, maxOpenFiles: config.maxOpenFiles, maxFileBytes: config.maxFileBytes },
      ...(startsEarly ? { startsEarly } : {}),
    } as const;
    return runStaged(backend, template, files, { ...io, ...(this.signal ? { signal: this.signal } : {}) });
  }

  private describe(outcome: SandboxOutcome, stdout: CappedCapture, stderr: CappedCapture, memoryBytes: number): Outcome {
    for (const [stream, name] of [
      [stdout, 'stdout'],
      [stderr, 'stderr'],
    ] as const) {
      if (stream.truncated) stream.appendNote(`\n[${name} truncated: ${stream.observedBytes} bytes written, the first ${stream.bytes().length} kept]`);
    }
    // The snippet contract has one code for a run that was stopped: 124, as timeout(1) says.
    const interruption = interruptionOf(outcome);
    if (interruption === 'timed_out' || interruption === 'canceled') {
      stderr.appendNote(interruption === 'timed_out' ? SNIPPET_TIMEOUT_NOTE : '\nExecution canceled');
      return { stdout: stdout.text(), stderr: stderr.text(), exit_code: SNIPPET_EXIT.timedOut, error: '', usage: usageOf(outcome) };
    }
    if (interruption === 'out_of_memory') stderr.appendNote(`\nMemoryError: killed after exceeding the sandbox memory limit of ${Math.round(memoryBytes / 1024 / 1024)} MiB`);
    const exitCode = outcome.exitCode ?? 128 + signalNumber(outcome.signal);
    return { stdout: stdout.text(), stderr: stderr.text(), exit_code: exitCode, error: '', usage: usageOf(outcome) };
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
  return {
    trace_id: traceId ?? traceIdOf(undefined),
    stdout: '',
    stderr: `invalid request: ${message}`,
    exit_code: SNIPPET_EXIT.invalidRequest,
    error: `invalid request: ${message}`,
  };
}

function failure(traceId: string, exitCode: number, message: string): SnippetResponse {
  return { trace_id: traceId, stdout: '', stderr: message, exit_code: exitCode, error: message };
}
