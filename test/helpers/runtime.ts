import { mkdirSync } from 'node:fs';
import { loadConfig, type RunnerConfig } from '../../src/runner/config.js';
import { RunnerRuntime } from '../../src/runner/runtime.js';
import type { PreparedSandbox, SandboxBackend, SandboxTemplate } from '../../src/isolation/types.js';
import { TEST_STATE_DIR } from './suite-env.js';

export { processEnv, TEST_STATE_DIR } from './suite-env.js';

export function testRuntime(overrides: Partial<RunnerConfig> = {}, parts: ConstructorParameters<typeof RunnerRuntime>[1] = {}): RunnerRuntime {
  mkdirSync(TEST_STATE_DIR, { recursive: true, mode: 0o755 });
  return new RunnerRuntime(loadConfig(process.env, { stateDir: TEST_STATE_DIR, ...overrides }), parts);
}

/**
 * The real backend, with a record of the sandboxes it prepared (to see the compile cache work).
 * Everything but prepare() goes straight to the wrapped backend, whatever the interface holds.
 */
export function countingBackend(inner: SandboxBackend): SandboxBackend & { readonly runs: SandboxTemplate[] } {
  const runs: SandboxTemplate[] = [];
  const prepare = (template: SandboxTemplate): Promise<PreparedSandbox> => {
    runs.push(template);
    return inner.prepare(template);
  };
  return new Proxy(inner as SandboxBackend & { readonly runs: SandboxTemplate[] }, {
    get(target, key) {
      if (key === 'runs') return runs;
      if (key === 'prepare') return prepare;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
