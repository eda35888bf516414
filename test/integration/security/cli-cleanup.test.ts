import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { runCli } from '../../helpers/cli.js';
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

// The sandbox prepared for such a job is discarded unstarted; its teardown once left nothing
// holding the event loop, and node exited 0 with nothing printed about half the time. Four
// rounds of the four are 16 runs: that bug passes all of them once in 2^16 (each run is a CLI
// start, about a core-second).
describe('a job that ends before its command starts is answered, non-zero, every time', () => {
  const RUNS = 4;
  const commands: Record<string, { argv: string[]; cwd?: string }> = {
    'an argv that is a bwrap option': { argv: ['--bind', '/', '/tmp'] },
    'an empty argv[0]': { argv: [''] },
    'a missing command': { argv: ['no-such-command-anywhere'] },
    'a cwd the work dir lacks': { argv: ['true'], cwd: 'no-such-dir' },
  };
  it(`${Object.keys(commands).join(', ')}: ${RUNS} runs each`, async () => {
    for (let round = 0; round < RUNS; round++) {
      await Promise.all(
        Object.entries(commands).map(async ([what, command]) => {
          const { code, stdout, stderr } = await runCli('agent-runner', ['run'], { stdin: JSON.stringify({ command }) });
          assert.notEqual(code, 0, `${what}, run ${round + 1}: exit 0 (stdout ${JSON.stringify(stdout)}, stderr ${JSON.stringify(stderr)})`);
          const result = JSON.parse(stdout) as { status: string };
          assert.notEqual(result.status, 'completed', `${what}, run ${round + 1}`);
        }),
      );
    }
  });
});
