import { performance } from 'node:perf_hooks';
import { CodedError, contractError } from '../contract/errors.js';
import type { AgentEndEvent, AgentOutputEvent } from '../contract/sandbox-agent.js';
import type { SandboxExecRequest, SandboxExecResult } from '../contract/sandbox.js';
import { KeptOutput } from '../util/kept-output.js';
import { AgentOperationError, SandboxGoneError, type SandboxAgentPort } from './agent-port.js';

export interface ExecLimits {
  timeoutMs: number;
  /** Output kept of each stream; the rest is counted, not kept. */
  maxStdoutBytes: number;
  maxStderrBytes: number;
}

const SIGKILL = 9;
/** What a shell answers for a command it may not run, and for one it did not find. */
const START_FAILURE_EXIT: Partial<Record<AgentOperationError['code'], number>> = { permission_denied: 126, not_found: 127 };

/**
 * Runs one command to its end in a sandbox, through its agent: its output kept up to the caps
 * here on the host (the sandbox's code writes as much as it likes), its whole process tree
 * killed at the timeout (exit 124, as timeout(1) answers). `sandboxEnded` aborts when the
 * sandbox ends under it: the agent then forgets its processes without an end event, so the
 * wait ends with SandboxGoneError instead.
 */
export async function runToEnd(sandboxId: string, agent: SandboxAgentPort, request: SandboxExecRequest, limits: ExecLimits, sandboxEnded: AbortSignal): Promise<SandboxExecResult> {
  const [cmd, ...args] = 'argv' in request ? request.argv : ['/bin/bash', '-l', '-c', request.cmd];
  const stdout = new KeptOutput(limits.maxStdoutBytes);
  const stderr = new KeptOutput(limits.maxStderrBytes);
  const began = performance.now();
  const result = (exitCode: number, timedOut: boolean): SandboxExecResult => ({
    sandbox_id: sandboxId,
    stdout: stdout.text('stdout'),
    stderr: stderr.text('stderr'),
    exit_code: exitCode,
    timed_out: timedOut,
    duration_ms: Math.round(performance.now() - began),
  });

  let ended: AgentEndEvent | undefined;
  let finish!: (event: AgentEndEvent) => void;
  const end = new Promise<AgentEndEvent>((resolve) => (finish = resolve));
  const listener = {
    output: (event: AgentOutputEvent) => (event.stream === 'stderr' ? stderr : stdout).add(event.data),
    end: (event: AgentEndEvent) => finish((ended = event)),
  };
  let pid: number;
  try {
    ({ pid } = await agent.start(
      {
        op: 'start',
        cmd: cmd!,
        args,
        envs: request.envs ?? {},
        ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
        stdin: request.stdin !== undefined,
        user: request.user ?? 'user',
      },
      listener,
    ));
  } catch (error) {
    // A command line or environment exec cannot take is the request's to fix.
    if (error instanceof AgentOperationError && error.code === 'invalid') throw new CodedError(contractError('validation.invalid_request', error.message));
    const exitCode = error instanceof AgentOperationError ? START_FAILURE_EXIT[error.code] : undefined;
    if (exitCode === undefined) throw error;
    stderr.add(Buffer.from(`${cmd}: ${error instanceof Error ? error.message : String(error)}\n`));
    return result(exitCode, false);
  }

  let timedOut = false;
  const deadline = setTimeout(() => {
    if (ended) return;
    timedOut = true;
    // To the process's group: what it started in the background goes too.
    agent.request({ op: 'signal', pid, signal: SIGKILL }).catch(() => undefined);
  }, limits.timeoutMs);
  let onEnded: (() => void) | undefined;
  const gone = new Promise<never>((_resolve, reject) => {
    onEnded = () => reject(new SandboxGoneError(`sandbox ${sandboxId} ended while the command ran`));
    if (sandboxEnded.aborted) onEnded();
    else sandboxEnded.addEventListener('abort', onEnded, { once: true });
  });
  // Read by the race below; a failure before it (stdin) must not leave this one unhandled.
  gone.catch(() => undefined);
  try {
    if (request.stdin !== undefined) await feedStdin(agent, pid, request.stdin);
    const event = await Promise.race([end, gone]);
    if (timedOut) return result(124, true);
    return result(event.signal === null ? event.exit_code : 128 + event.signal, false);
  } finally {
    clearTimeout(deadline);
    sandboxEnded.removeEventListener('abort', onEnded!);
  }
}

/** Writes all of stdin, then its end; a process that already ended (or never reads) is no failure. */
async function feedStdin(agent: SandboxAgentPort, pid: number, stdin: string): Promise<void> {
  try {
    if (stdin.length > 0) await agent.request({ op: 'input', pid, data: Buffer.from(stdin, 'utf8') });
    await agent.request({ op: 'close_stdin', pid });
  } catch (error) {
    if (!(error instanceof AgentOperationError)) throw error;
  }
}
