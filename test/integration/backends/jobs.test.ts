import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import type { RunJobResult } from '../../../src/contract/run-job.js';
import { runJob } from '../../../src/runner/run-job.js';
import { runTask } from '../../../src/tasks/run-task.js';
import { availableKinds } from '../../helpers/backends.js';
import { testRuntime } from '../../helpers/runtime.js';
import { makeWorkspace } from '../../helpers/workspace.js';

/** The same run job and code task on every available backend: the same result fields (timings aside). */
const runtime = testRuntime();
after(() => runtime.dispose());

const files = {
  'main.py': 'import os\nos.makedirs("out", exist_ok=True)\nopen("out/report.txt","w").write(open("data/in.txt").read().upper())\nprint(sorted(os.listdir(".")))\n',
  'data/in.txt': 'hello',
  'skip/big.bin': 'x'.repeat(1000),
  '.env': 'SECRET=1',
};
const request = (path: string, kind: string) => ({
  workspace: { source: 'local_path', path, exclude: ['skip/**'] },
  command: { argv: ['python3', 'main.py'] },
  artifacts: ['out/**'],
  backend: { kind },
});

/** What must not differ between backends. */
function comparable(result: RunJobResult): unknown {
  return {
    status: result.status,
    exit_code: result.exit_code,
    stdout: result.stdout,
    stderr: result.stderr,
    workspace: result.workspace,
    artifacts: result.artifacts.map(({ path, size, sha256 }) => ({ path, size, sha256 })),
    // The request hash covers the backend named (and this run's workspace path): it differs.
    replay: { workspace_sha256: result.replay.workspace_sha256, result_sha256: result.replay.result_sha256 },
  };
}

const results = new Map<string, RunJobResult>();

for (const kind of await availableKinds(runtime, 'run-job')) {
  describe(`jobs on ${kind}`, () => {
    it('snapshots the workspace with its exclusions, runs, collects artifacts, and gives stable replay hashes', async () => {
      const path = makeWorkspace(files);
      const first = await runJob(request(path, kind), { runtime });
      assert.equal(first.status, 'completed', JSON.stringify(first.error));
      assert.deepEqual(first.backend, { kind });
      assert.equal(first.stdout.text, "['data', 'main.py', 'out']\n", 'the excluded tree and .env are not in the snapshot');
      assert.equal(first.artifacts.length, 1);
      const [artifact] = first.artifacts;
      assert.equal(artifact!.path, 'out/report.txt');
      assert.equal(artifact!.sha256, createHash('sha256').update('HELLO').digest('hex'));
      assert.equal(readFileSync(fileURLToPath(artifact!.uri), 'utf8'), 'HELLO');
      const second = await runJob(request(path, kind), { runtime });
      assert.deepEqual(second.replay, first.replay);
      writeFileSync(join(path, 'data/in.txt'), 'changed');
      const third = await runJob(request(path, kind), { runtime });
      assert.equal(third.replay.request_sha256, first.replay.request_sha256);
      assert.notEqual(third.replay.workspace_sha256, first.replay.workspace_sha256);
      results.set(kind, first);
    });

    it('runs a code task', async () => {
      const task = await runTask(
        { lang: 'python', code: 'print("seen")\nreturn [{"n": len(_items)}]', mode: 'all_items', items: [{ json: { a: 1 } }, { json: { a: 2 } }], backend: { kind } },
        { runtime },
      );
      const { usage, ...answer } = task;
      assert.deepEqual({ ...answer, task_id: '' }, { task_id: '', result: [{ json: { n: 2 } }], print_args: [["'seen'"]] });
      assert.ok(usage && usage.wall_ms > 0, JSON.stringify(usage));
    });
  });
}

it('gives the same result fields on every backend that ran it', () => {
  const [reference, ...others] = [...results.entries()];
  assert.ok(reference, 'at least local_process ran');
  for (const [kind, result] of others) assert.deepEqual(comparable(result), comparable(reference[1]), `${kind} differs from ${reference[0]}`);
});
