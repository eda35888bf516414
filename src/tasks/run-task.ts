import { randomUUID } from 'node:crypto';
import { validate } from '../contract/validate.js';
import { findLanguage } from '../languages/catalog.js';
import { isMissing } from '../languages/toolchain.js';
import { withRuntime, type RunnerRuntime } from '../runner/runtime.js';
import { CappedCapture } from '../isolation/output-capture.js';
import type { SandboxOutcome } from '../isolation/types.js';
import { interruptionError, interruptionOf, setupFailure } from '../runner/outcome.js';
import { runStaged } from '../runner/staged-run.js';
import { TaskRequestSchema, type PrintArgs, type TaskErrorCode, type TaskErrorResponse, type TaskRequest, type TaskResponse, type TaskResultResponse } from '../contract/task.js';
import { taskSandbox } from './launch.js';
import { ResultChannel } from './result-channel.js';
import { usageOf } from '../contract/usage.js';
import { forgery, oversizedResult, type Expected } from './result-checks.js';

export interface TaskOptions {
  /** The runtime to run on; without one, a runtime made for this call from the environment's configuration (runtime.ts: withRuntime). */
  runtime?: RunnerRuntime;
  /** Aborting kills the task as a timeout would. */
  signal?: AbortSignal;
}

type Answer = Omit<TaskResultResponse, 'task_id'> | Omit<TaskErrorResponse, 'task_id'>;

/**
 * Runs one code task in the sandbox: the items go in, the result items, the captured prints
 * and any error come back. Never throws: a bad request, a sandbox that cannot start and a
 * task that fails are all responses.
 */
export async function runTask(request: unknown, options: TaskOptions = {}): Promise<TaskResponse> {
  return { task_id: taskIdOf(request), ...(await withRuntime(options.runtime, (runtime) => respond(runtime, request, options.signal))) };
}

async function respond(runtime: RunnerRuntime, request: unknown, signal: AbortSignal | undefined): Promise<Answer> {
  const checked = validate(TaskRequestSchema, request);
  if (!checked.ok) return invalid(checked.message);
  const maxTimeoutMs = runtime.config.snippet.maxTimeoutSeconds * 1000;
  const timeoutMs = checked.value.timeout_ms ?? runtime.config.snippet.defaultTimeoutSeconds * 1000;
  if (timeoutMs > maxTimeoutMs) return invalid(`timeout_ms must be at most ${maxTimeoutMs}, got ${timeoutMs}`);
  // The request schema states the default bounds; a configuration may draw them tighter.
  const bounds = runtime.config.tasks;
  const { memory_bytes: memory, max_result_bytes: resultBytes } = checked.value.limits ?? {};
  if (memory !== undefined && memory < bounds.minMemoryBytes) return invalid(`limits.memory_bytes must be >= ${bounds.minMemoryBytes}, got ${memory}`);
  if (memory !== undefined && memory > bounds.maxMemoryBytes) return invalid(`limits.memory_bytes must be <= ${bounds.maxMemoryBytes}, got ${memory}`);
  if (resultBytes !== undefined && resultBytes > bounds.maxResultBytesCeiling)
    return invalid(`limits.max_result_bytes must be <= ${bounds.maxResultBytesCeiling}, got ${resultBytes}`);
  try {
    return await execute(runtime, checked.value, timeoutMs, signal);
  } catch (error) {
    const setup = setupFailure(error);
    if (setup.status === 'backend_unavailable') return failure('backend.unavailable', `sandbox unavailable: ${setup.error.message}`);
    return failure('internal.error', `internal error: ${(error as Error).message}`);
  }
}

async function execute(runtime: RunnerRuntime, task: TaskRequest, timeoutMs: number, signal: AbortSignal | undefined): Promise<Answer> {
  const config = runtime.config.snippet;
  const tasks = runtime.config.tasks;
  // The schema admits only languages the catalog has.
  const language = findLanguage(task.lang)!;
  const toolchain = await runtime.toolchains.get(language);
  if (isMissing(toolchain)) return failure('backend.unavailable', toolchain.message);

  const memoryBytes = task.limits?.memory_bytes ?? config.memoryBytes;
  const maxResultBytes = task.limits?.max_result_bytes ?? tasks.defaultMaxResultBytes;
  const input = JSON.stringify({
    mode: task.mode,
    items: task.items,
    max_result_bytes: maxResultBytes,
    max_print_calls: tasks.maxPrintCalls,
    max_print_bytes: tasks.maxPrintBytes,
  });
  const backend = runtime.backends.get(task.backend?.kind);
  const plan = taskSandbox(task.lang, language, toolchain, memoryBytes, config, { code: task.code, input });
  const printCaps = { maxCalls: tasks.maxPrintCalls, maxBytes: tasks.maxPrintBytes, call: task.lang === 'python' ? 'print()' : 'console.log()' };
  const channel = new ResultChannel(maxResultBytes + tasks.maxPrintBytes + tasks.messageOverheadBytes, printCaps);
  const stderr = new CappedCapture(config.maxStderrBytes);
  const outcome = await runStaged(backend, plan.template, plan.files, { timeoutMs, stdout: channel, stderr, ...(signal ? { signal } : {}) });
  if (stderr.truncated) stderr.appendNote(`\n[stderr truncated: ${stderr.observedBytes} bytes written, the first ${config.maxStderrBytes} kept]`);
  return { ...answer(channel, outcome, stderr.text(), { timeoutMs, memoryBytes, maxResultBytes, mode: task.mode, inputCount: task.items.length }), usage: usageOf(outcome) };
}

interface Context extends Expected {
  timeoutMs: number;
  memoryBytes: number;
  maxResultBytes: number;
}

/**
 * Every byte on the result pipe may come from the task's code, so the answer is the host's:
 * print_args are the calls the host was streamed and capped, whatever the message says; a
 * message the harness could not have sent is a protocol error, even when a kill follows it;
 * a kill (cancel, timeout, memory) explains a missing or cut-off message better than the pipe
 * does; and a message counts only from a process that then exited 0.
 */
function answer(channel: ResultChannel, outcome: SandboxOutcome, stderr: string, context: Context): Answer {
  const reading = channel.read();
  const printArgs = channel.printArgs();
  const fail = (code: TaskErrorCode, message: string): Answer => failure(code, message, stderr, printArgs);
  const forged = 'message' in reading ? forgery(reading.message, printArgs, context) : 'protocolError' in reading && !reading.cutOff ? reading.protocolError : null;
  if (forged !== null) return fail('task.protocol_error', forged);
  const interruption = interruptionOf(outcome);
  if (interruption) {
    const messages = {
      canceled: 'the task was canceled',
      timed_out: `timed out after ${context.timeoutMs} ms`,
      out_of_memory: `killed after exceeding the memory limit of ${Math.round(context.memoryBytes / 1024 / 1024)} MiB`,
    };
    const { code, message } = interruptionError(interruption, messages[interruption]);
    return fail(code as TaskErrorCode, message);
  }
  if ('protocolError' in reading) return fail('task.protocol_error', reading.protocolError);
  if (!('message' in reading) || outcome.signal || outcome.exitCode !== 0) {
    const ending = outcome.signal ? `was killed by ${outcome.signal}` : `exited with code ${outcome.exitCode}`;
    return fail('task.crashed', `the interpreter ${ending} ${'message' in reading ? 'after sending its message' : 'before sending a result'}`);
  }
  const { message } = reading;
  if ('error' in message) return { error_code: 'task.failed', error: { ...message.error, stderr }, print_args: printArgs };
  const oversized = oversizedResult(message.result, context.maxResultBytes);
  return oversized === null ? { result: message.result, print_args: printArgs } : fail('task.failed', oversized);
}

function invalid(message: string): Answer {
  return failure('validation.invalid_request', `invalid request: ${message}`);
}

function failure(code: TaskErrorCode, message: string, stderr = '', printArgs: PrintArgs = []): Answer {
  return { error_code: code, error: { message, description: '', stack: '', stderr }, print_args: printArgs };
}

function taskIdOf(request: unknown): string {
  const given = request !== null && typeof request === 'object' ? (request as Record<string, unknown>).task_id : undefined;
  return typeof given === 'string' && given.length > 0 && given.length <= 256 ? given : `task-${randomUUID()}`;
}
