import type { ResourceLimits, SandboxProfile, SandboxTemplate } from './types.js';

/** PATH inside the minimal-system profiles: the host's own directories, read-only. */
export const SANDBOX_SEARCH_PATH = ['/usr/local/bin', '/usr/bin', '/bin'];

/**
 * What every job of a profile starts from: an otherwise empty environment. The face adds what
 * its language or request needs on top; nothing of the service's own environment is passed.
 */
export function baseEnvironment(profile: Exclude<SandboxProfile, 'workspace'>): Record<string, string> {
  switch (profile) {
    case 'snippet':
    case 'task':
    case 'run-job':
      return { PATH: SANDBOX_SEARCH_PATH.join(':'), HOME: '/tmp', LANG: 'C.UTF-8' };
  }
}

/**
 * One small command in a minimal sandbox, as backends run to learn that they work here (and
 * the microVM's guest runs to warm its runtimes): tight limits unless raised.
 */
export function probeTemplate(argv: readonly string[], limits: Partial<ResourceLimits> = {}): SandboxTemplate {
  return {
    profile: 'snippet',
    argv,
    cwd: '/tmp',
    env: {},
    mounts: [],
    files: [],
    network: 'none',
    limits: { memoryBytes: 64 * 1024 * 1024, memoryMechanism: 'cgroup', maxProcesses: 8, maxOpenFiles: 64, maxFileBytes: 1024 * 1024, ...limits },
  };
}
