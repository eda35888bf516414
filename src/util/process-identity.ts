import { readFileSync } from 'node:fs';

/**
 * "pid.starttime" from /proc, or null when the process does not exist: what a claim on a
 * host-wide resource is named after, so that a recycled pid cannot pass for its holder.
 */
export function processIdentity(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const startTime = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    return `${pid}.${startTime}`;
  } catch {
    return null;
  }
}

/** This process's identity. */
export const SELF_IDENTITY = processIdentity(process.pid) ?? `${process.pid}.unknown`;
