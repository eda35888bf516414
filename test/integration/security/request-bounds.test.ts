import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { runJob } from '../../../src/runner/run-job.js';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { runTask } from '../../../src/tasks/run-task.js';
import { testRuntime } from '../../helpers/runtime.js';

const runtime = testRuntime();
after(() => runtime.dispose());

/** {"a": {"a": ... }} `depth` levels deep, built without recursion. */
function nested(depth: number): Record<string, unknown> {
  let node: Record<string, unknown> = {};
  for (let level = 0; level < depth; level += 1) node = { a: node };
  return node;
}

describe('request size and depth are bounded before anything else runs', () => {
  it('a 10^4-deep trace is a validation error naming the field, not a crash', async () => {
    const result = await runJob({ command: { argv: ['true'] }, trace: { deep: nested(10_000) } }, { runtime });
    assert.equal(result.status, 'failed');
    assert.equal(result.error?.code, 'validation.invalid_request');
    assert.match(result.error!.message, /^trace\.deep(\.a)+ nests deeper than 64 levels$/);
    assert.equal(result.exit_code, null, 'nothing ran');
  });

  it('snippets and tasks refuse the same way', async () => {
    const snippet = await executeSnippet({ lang: 'python', code: 'print(1)', trace_id: 't', extra: nested(10_000) }, { runtime });
    assert.equal(snippet.exit_code, 2);
    const task = await runTask({ lang: 'python', mode: 'all_items', code: 'return _items', items: [{ json: nested(10_000) }] }, { runtime });
    assert.ok('error_code' in task && task.error_code === 'validation.invalid_request', JSON.stringify(task).slice(0, 300));
  });

  it('depth within the bound is accepted', async () => {
    const result = await runJob({ command: { argv: ['true'] }, trace: { deep: nested(50) } }, { runtime });
    assert.equal(result.status, 'completed');
  });
});
