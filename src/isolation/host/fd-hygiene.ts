import { readdirSync, readFileSync } from 'node:fs';

const O_CLOEXEC = 0o2000000;
const FIRST_NON_STDIO_FD = 3;

/**
 * fds above stdio that this process holds without close-on-exec. Node opens its own with
 * O_CLOEXEC, so these came from whoever started us (a shell, an agent's tool harness, a CI
 * runner), and a child inherits them in turn: bubblewrap does not close them, so they would
 * reach the job, which could read them or hold the caller's pipe open for as long as it runs.
 * Launchers overwrite each with /dev/null in their stdio array.
 */
export function inheritedFds(): number[] {
  const fds: number[] = [];
  for (const name of readdirSync('/proc/self/fd')) {
    const fd = Number(name);
    if (fd < FIRST_NON_STDIO_FD) continue;
    try {
      const flags = /^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
      if (flags && (parseInt(flags[1]!, 8) & O_CLOEXEC) === 0) fds.push(fd);
    } catch {
      // Closed while we looked (the directory listing's own fd, for one).
    }
  }
  return fds;
}

/**
 * Read once: inherited fds are there from the start and Node never adds one without
 * close-on-exec, while a busy service holds hundreds of fds whose fdinfo is not worth
 * re-reading at every spawn. (If an inherited number is later closed and reused by one of our
 * own close-on-exec fds, the child gets /dev/null there instead: harmless.)
 */
let inheritedAtStart: number[] | undefined;

/**
 * A spawn stdio array: `wanted` in its first slots, every inherited fd not given a meaning
 * there overwritten with `devNull`, and gaps filled with 'ignore' (Node compacts holes).
 */
export function stdioWithoutLeaks<T>(wanted: ReadonlyArray<T | 'ignore'>, devNull: number): Array<T | 'ignore' | number> {
  inheritedAtStart ??= inheritedFds();
  const stdio: Array<T | 'ignore' | number> = [...wanted];
  for (const fd of inheritedAtStart) {
    if (fd < stdio.length && stdio[fd] !== 'ignore') continue;
    while (stdio.length <= fd) stdio.push('ignore');
    stdio[fd] = devNull;
  }
  return stdio;
}
