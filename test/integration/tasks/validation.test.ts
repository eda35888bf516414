import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { BubblewrapBackend } from '../../../src/isolation/bubblewrap/bubblewrap-backend.js';
import { runTask } from '../../../src/tasks/run-task.js';
import { countingBackend, TEST_STATE_DIR, testRuntime } from '../../helpers/runtime.js';

const runtime = testRuntime();
after(() => runtime.dispose());

const valid = { lang: 'python', mode: 'all_items', items: [{ json: {} }], code: 'return _items' };

describe('code task requests', () => {
  it('echoes the task id, even of an invalid request, and generates one when missing', async () => {
    assert.equal((await runTask({ ...valid, task_id: 'wf-7', mode: 'nope' }, { runtime })).task_id, 'wf-7');
    assert.equal((await runTask({ ...valid, task_id: 'wf-8' }, { runtime })).task_id, 'wf-8');
    assert.match((await runTask(valid, { runtime })).task_id, /^task-[0-9a-f-]{36}$/);
  });

  it('keeps the sandbox template the same between tasks, so pre-started sandboxes serve them', async () => {
    const backend = countingBackend(new BubblewrapBackend({ runtimeDir: join(TEST_STATE_DIR, 'runtime') }));
    const counted = testRuntime({}, { backend });
    try {
      for (const lang of ['python', 'node']) {
        await runTask({ lang, mode: 'all_items', items: [{ json: { a: 1 } }], code: 'return []' }, { runtime: counted });
        await runTask({ lang, mode: 'per_item', items: [{ json: { b: 2 } }, { json: {} }], code: 'return None' }, { runtime: counted });
      }
      const [python1, python2, node1, node2] = backend.runs.map((template) => JSON.stringify(template));
      assert.equal(python1, python2);
      assert.equal(node1, node2);
    } finally {
      await counted.dispose();
    }
  });
});
