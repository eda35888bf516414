const MiB = 1024 * 1024;

/**
 * Task limits that the snippet configuration does not already give (timeouts, default memory,
 * processes and files come from RunnerConfig.snippet: a task is a snippet with items).
 */
export const TASK_LIMITS = {
  defaultMaxResultBytes: 16 * MiB,
  maxResultBytesCeiling: 256 * MiB,
  /** Below this neither interpreter starts reliably. */
  minMemoryBytes: 64 * MiB,
  maxMemoryBytes: 8192 * MiB,
  maxPrintCalls: 100,
  /** print_args stop growing here too, so the parent can bound the message it reads. */
  maxPrintBytes: 1 * MiB,
  /** Room in a message for everything but the result and print_args (an error's message and stack). */
  messageOverheadBytes: 1 * MiB,
} as const;
