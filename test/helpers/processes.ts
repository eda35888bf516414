import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * Host processes whose command line starts with `marker` (jobs rename themselves with
 * `exec -a marker`); anchored, so a bwrap whose argv merely mentions the marker is not counted.
 */
export function hostProcessesMatching(marker: string): string[] {
  try {
    return execFileSync('pgrep', ['-af', `^${marker}`], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
  } catch {
    return [];
  }
}

/** Helpers this process started running `program` (setpriv, nsenter and unshare exec into it): a relay, a namespace's holder. */
export function helpersOfOurs(program: string): string[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith(program) && Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid;
      } catch {
        return false; // it exited while we looked
      }
    });
}
