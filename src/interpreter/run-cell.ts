import { performance } from 'node:perf_hooks';
import type { OutputLine } from '../contract/code-interpreter.js';
import type { SandboxCodeResult, SandboxRunCodeRequest, SandboxRunCodeResult } from '../contract/sandbox.js';
import { KeptOutput } from '../util/kept-output.js';
import type { CodeContexts, InterpreterTarget } from './code-contexts.js';

/** The results one gathered cell carries, together (a chart's png is tens of KiB; its size is the answer's). */
export const MAX_CELL_RESULT_BYTES = 32 * 1024 * 1024;

export interface CellLimits {
  timeoutMs: number;
  maxStdoutBytes: number;
  maxStderrBytes: number;
  /** The results' formats together, as JSON; the results past it are left out, said in stderr. */
  maxResultBytes: number;
}

/** A cell run to its end, gathered into one answer. */
export type GatheredCell = Omit<SandboxRunCodeResult, 'sandbox_id'>;

/**
 * Runs a cell and gathers its output lines into one answer: output kept up to the caps here on
 * the host, results in order up to their own cap. `run` starts the cell, sends its lines to
 * `onOutput` and interrupts it when `signal` aborts: at the cell's timeout (the context keeps
 * its state) or when `ended` does (its sandbox ended).
 */
export async function gatherCell(run: (onOutput: (line: OutputLine) => void, signal: AbortSignal) => Promise<void>, limits: CellLimits, ended: AbortSignal): Promise<GatheredCell> {
  const began = performance.now();
  const stdout = new KeptOutput(limits.maxStdoutBytes);
  const stderr = new KeptOutput(limits.maxStderrBytes);
  const results: SandboxCodeResult[] = [];
  let resultBytes = 0;
  let leftOut = 0;
  let error: GatheredCell['error'] = null;
  let executionCount: number | null = null;
  let timedOut = false;

  const onOutput = (line: OutputLine): void => {
    switch (line.type) {
      case 'stdout':
      case 'stderr':
        (line.type === 'stdout' ? stdout : stderr).add(Buffer.from(line.text, 'utf8'));
        return;
      case 'number_of_executions':
        executionCount = line.execution_count;
        return;
      case 'error':
        error = { name: line.name, value: line.value, traceback: line.traceback };
        return;
      case 'result': {
        const { type: _type, ...result } = line;
        const bytes = JSON.stringify(result).length;
        if (resultBytes + bytes > limits.maxResultBytes) leftOut += 1;
        else {
          resultBytes += bytes;
          results.push(result);
        }
      }
    }
  };

  const abort = new AbortController();
  const pastTimeout = new Error('the cell ran past its timeout');
  const deadline = setTimeout(() => {
    timedOut = true;
    abort.abort(pastTimeout);
  }, limits.timeoutMs);
  const onEnded = (): void => abort.abort(ended.reason);
  ended.addEventListener('abort', onEnded, { once: true });
  try {
    await run(onOutput, abort.signal);
  } catch (error) {
    // Its timeout passed before the cell began (its context's kernel was still starting): a timed-out cell, not a failure.
    if (error !== pastTimeout) throw error;
  } finally {
    clearTimeout(deadline);
    ended.removeEventListener('abort', onEnded);
  }
  if (leftOut > 0) stderr.add(Buffer.from(`\n[${leftOut} results left out: the results of one cell carry at most ${limits.maxResultBytes} bytes]\n`));
  return {
    stdout: stdout.text('stdout'),
    stderr: stderr.text('stderr'),
    results,
    error,
    execution_count: executionCount,
    timed_out: timedOut,
    duration_ms: Math.round(performance.now() - began),
  };
}

/**
 * One cell of a sandbox's code interpreter run to its end and gathered into one answer (our
 * /v1/sandboxes/{id}/run_code and the MCP tool, where E2B's /execute streams).
 */
export async function runCell(
  contexts: CodeContexts,
  sandboxId: string,
  target: InterpreterTarget,
  request: SandboxRunCodeRequest,
  limits: CellLimits,
  sandboxEnded: AbortSignal,
): Promise<SandboxRunCodeResult> {
  const gathered = await gatherCell(
    (onOutput, signal) =>
      contexts.execute(sandboxId, target, {
        code: request.code,
        contextId: request.context_id ?? null,
        language: request.language ?? null,
        envVars: request.env_vars ?? null,
        signal,
        onOutput,
      }),
    limits,
    sandboxEnded,
  );
  return { sandbox_id: sandboxId, ...gathered };
}
