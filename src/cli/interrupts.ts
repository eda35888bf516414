/**
 * Runs a job so that SIGINT or SIGTERM cancels it (its whole process tree is killed) instead
 * of killing the CLI mid-job: the CLI then still cleans up (work-dir mounts, cgroups) and
 * answers with the canceled result. A second signal gets the default behaviour.
 */
export async function cancelOnInterrupt<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const cancel = () => controller.abort();
  process.once('SIGINT', cancel);
  process.once('SIGTERM', cancel);
  try {
    return await work(controller.signal);
  } finally {
    process.off('SIGINT', cancel);
    process.off('SIGTERM', cancel);
  }
}
