import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { BackendKind } from '../../src/contract/backend-kinds.js';
import type { RunnerRuntime } from '../../src/runner/runtime.js';

/**
 * The backend kinds a suite runs against: every kind available on this host. An unavailable
 * kind is reported as a skipped test carrying its probe's reason, never left out silently;
 * local_process must always be available.
 */
export async function availableKinds(runtime: RunnerRuntime, profile: string): Promise<BackendKind[]> {
  const described = await runtime.backends.describe();
  const kinds: BackendKind[] = [];
  for (const backend of described) {
    if (backend.available && backend.capabilities.profiles.includes(profile)) kinds.push(backend.kind);
    else it(`${backend.kind}: not run here`, { skip: backend.available ? `it has no ${profile} profile` : backend.notes.join('; ') }, () => undefined);
  }
  it('local_process is available', () => assert.ok(kinds.includes('local_process'), JSON.stringify(described)));
  return kinds;
}
