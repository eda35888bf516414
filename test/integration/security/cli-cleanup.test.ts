import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { waitUntil } from '../../helpers/wait.js';

const CLI = fileURLToPath(new URL('../../../dist/cli/agent-runner.js', import.meta.url));

function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .filter((line) => line.split(' ')[1]?.startsWith(`${dir}/`));
}

/** `agent-runner run` on a state dir of its own, so its mounts can be counted. */
function run(stateDir: string, argv: string[]) {
  const child = spawn(process.execPath, [CLI, 'run', '--', ...argv], { env: { ...process.env, AGENT_RUNNER_STATE_DIR: stateDir }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, stdout: () => stdout };
}

function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cli-cleanup-'));
  // Sandboxes run as unprivileged uids that must reach the staged files.
  chmodSync(dir, 0o755);
  return dir;
}

describe('the CLI leaves nothing mounted', () => {
  it('after a run, its work-dir tmpfs is unmounted', async () => {
    const dir = stateDir();
    const done = run(dir, ['true']);
    assert.equal(await done.exited, 0);
    assert.deepEqual(mountsUnder(dir), []);
  });

  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    it(`${signal} cancels the job, answers, and unmounts`, async () => {
      const dir = stateDir();
      const running = run(dir, ['sleep', '60']);
      await waitUntil(() => mountsUnder(dir).length > 0, 'the job has its work dir');
      running.child.kill(signal);
      assert.equal(await running.exited, 1);
      assert.equal(JSON.parse(running.stdout()).status, 'canceled');
      assert.deepEqual(mountsUnder(dir), []);
    });
  }
});
