import { contractError, type ContractError, type ErrorCode } from '../contract/errors.js';
import type { TerminalStatus } from '../contract/run-job.js';
import { SandboxUnavailableError, type SandboxOutcome } from '../isolation/types.js';

/**
 * How every face reads a sandbox's end. A kill explains the end better than the exit status
 * it caused (a timed-out program "exits" by SIGKILL), so a cancel, a timeout and the OOM
 * killer are told apart first, in that order: a cancel or timeout may trip the OOM check too.
 */
export type Interruption = 'canceled' | 'timed_out' | 'out_of_memory';

export function interruptionOf(outcome: SandboxOutcome): Interruption | null {
  if (outcome.aborted) return 'canceled';
  if (outcome.timedOut) return 'timed_out';
  if (outcome.oomKilled) return 'out_of_memory';
  return null;
}

const INTERRUPTIONS: Readonly<Record<Interruption, { status: TerminalStatus; code: ErrorCode }>> = {
  canceled: { status: 'canceled', code: 'run.canceled' },
  timed_out: { status: 'timed_out', code: 'run.timed_out' },
  out_of_memory: { status: 'failed', code: 'run.out_of_memory' },
};

export function interruptionStatus(interruption: Interruption): TerminalStatus {
  return INTERRUPTIONS[interruption].status;
}

export function interruptionError(interruption: Interruption, message: string): ContractError {
  return contractError(INTERRUPTIONS[interruption].code, message);
}

/** A sandbox that could not be had or set up: the backend's fault, never the program's. */
export function setupFailure(error: unknown): { status: TerminalStatus; error: ContractError } {
  if (error instanceof SandboxUnavailableError) return { status: 'backend_unavailable', error: contractError('backend.unavailable', error.message) };
  return { status: 'setup_failed', error: contractError('backend.setup_failed', (error as Error).message) };
}
