/** Sends a signal, ignoring processes that are already gone. */
export function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // ESRCH: it exited first, which is what we wanted.
  }
}

/** Signals a whole process group (the launcher is spawned detached, so its pid is the group id). */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  signalQuietly(-pgid, signal);
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
