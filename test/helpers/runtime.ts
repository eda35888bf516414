import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type RunnerConfig } from '../../src/runner/config.js';
import { RunnerRuntime } from '../../src/runner/runtime.js';
import type { PreparedSandbox, SandboxBackend, SandboxTemplate } from '../../src/sandbox/types.js';

/**
 * One state dir for the whole suite: the rust toolchain mirror and compile cache survive
 * between files (tests that need a cold cache use code no other test uses).
 */
export const TEST_STATE_DIR = join(tmpdir(), 'agent-runner-test-state');

export function testRuntime(overrides: Partial<RunnerConfig> = {}, parts: ConstructorParameters<typeof RunnerRuntime>[1] = {}): RunnerRuntime {
  mkdirSync(TEST_STATE_DIR, { recursive: true, mode: 0o755 });
  return new RunnerRuntime(loadConfig(process.env, { stateDir: TEST_STATE_DIR, ...overrides }), parts);
}

/** The real backend, with a record of the sandboxes it prepared (to see the compile cache work). */
export class CountingBackend implements SandboxBackend {
  readonly name: string;
  runs: SandboxTemplate[] = [];

  constructor(private readonly inner: SandboxBackend) {
    this.name = inner.name;
  }

  status() {
    return this.inner.status();
  }

  prepare(template: SandboxTemplate): Promise<PreparedSandbox> {
    this.runs.push(template);
    return this.inner.prepare(template);
  }

  dispose(): Promise<void> {
    return this.inner.dispose();
  }
}
