import type { SandboxProfile } from './types.js';

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
