import { readdirSync, readFileSync } from 'node:fs';

const O_CLOEXEC = 0o2000000;
/** fds the launcher is given on purpose (stdio, release pipe, seccomp filter). */
const FIRST_UNMANAGED_FD = 5;

/**
 * fds this process holds without close-on-exec. Node opens its own with O_CLOEXEC, so these
 * were inherited (from a shell, a supervisor, a CI harness) and a child would inherit them
 * in turn: bubblewrap does not close them, so they would reach the job. The launcher's stdio
 * array overwrites each with /dev/null.
 */
export function leakableFds(): number[] {
  const leaks: number[] = [];
  for (const name of readdirSync('/proc/self/fd')) {
    const fd = Number(name);
    if (fd < FIRST_UNMANAGED_FD) continue;
    try {
      const flags = /^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
      if (flags && (parseInt(flags[1]!, 8) & O_CLOEXEC) === 0) leaks.push(fd);
    } catch {
      // Closed while we looked (the readdir's own fd, for one).
    }
  }
  return leaks;
}
