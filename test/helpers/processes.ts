import { execFileSync } from 'node:child_process';

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
