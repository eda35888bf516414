import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DEFAULT_TASK_LIMITS } from '../../../src/config/schema.js';
import { runTask } from '../../../src/tasks/run-task.js';
import { testRuntime } from '../../helpers/runtime.js';

const MiB = 1024 * 1024;
const runtime = testRuntime({ tasks: { ...DEFAULT_TASK_LIMITS, minMemoryBytes: 128 * MiB, maxMemoryBytes: 256 * MiB, maxResultBytesCeiling: 1 * MiB } });
after(() => runtime.dispose());

const valid = { lang: 'python', mode: 'all_items', items: [], code: 'return _items' };

describe('task bounds from the configuration', () => {
  const cases: Array<[string, object, string]> = [
    ['memory under the configured floor', { memory_bytes: 64 * MiB }, `invalid request: limits.memory_bytes must be >= ${128 * MiB}, got ${64 * MiB}`],
    ['memory over the configured ceiling', { memory_bytes: 512 * MiB }, `invalid request: limits.memory_bytes must be <= ${256 * MiB}, got ${512 * MiB}`],
    ['a result over the configured ceiling', { max_result_bytes: 2 * MiB }, `invalid request: limits.max_result_bytes must be <= ${1 * MiB}, got ${2 * MiB}`],
  ];
  for (const [name, limits, message] of cases) {
    it(`answers ${name} with validation.invalid_request`, async () => {
      const response = await runTask({ ...valid, limits }, { runtime });
      assert.ok('error' in response);
      assert.equal(response.error_code, 'validation.invalid_request');
      assert.equal(response.error.message, message);
    });
  }
});
