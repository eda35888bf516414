import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { BackendKind } from '../../src/contract/backend-kinds.js';
import type { RunnerRuntime } from '../../src/runner/runtime.js';

/**
 * Why a kind is left out of this run, or false: `npm run test:fast` sets
 * AGENT_RUNNER_TEST_KINDS=local_process to leave the slow gVisor and microVM matrix out of the
 * edit loop; `npm test` sets nothing and runs every kind the host has.
 */
export function kindLeftOut(kind: BackendKind): string | false {
  const chosen = process.env.AGENT_RUNNER_TEST_KINDS?.split(',').map((name) => name.trim());
  return chosen && !chosen.includes(kind) ? `left out by AGENT_RUNNER_TEST_KINDS=${chosen.join(',')} (npm run test:fast)` : false;
}

/**
 * The backend kinds a suite runs against: every kind available on this host. An unavailable
 * kind is reported as a skipped test carrying its probe's reason, never left out silently;
 * local_process must always be available.
 */
export async function availableKinds(runtime: RunnerRuntime, profile: string): Promise<BackendKind[]> {
  const described = await runtime.backends.describe();
  const kinds: BackendKind[] = [];
  for (const backend of described) {
    const leftOut = kindLeftOut(backend.kind);
    if (!leftOut && backend.available && backend.capabilities.profiles.includes(profile)) kinds.push(backend.kind);
    else it(`${backend.kind}: not run here`, { skip: leftOut || (backend.available ? `it has no ${profile} profile` : backend.notes.join('; ')) }, () => undefined);
  }
  it('local_process is available', () => assert.ok(kinds.includes('local_process'), JSON.stringify(described)));
  return kinds;
}
