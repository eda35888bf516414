import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { waitUntil } from '../../helpers/wait.js';

/**
 * The suite's own runner (scripts/run-tests.sh's parts): what a test file leaves running is
 * found and ended, the microVM-heavy files never run at once, and the run closes with one summary.
 */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const FIXTURES = join(ROOT, 'test/fixtures/runner');
const OWNER = join(ROOT, 'scripts/test-process-owner.mjs');

/** Runs node with `args` as the suite's scripts run; without this file's NODE_TEST_CONTEXT, which would make a runner refuse to start files. */
function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string }> {
  const { NODE_TEST_CONTEXT: _, ...inherited } = process.env;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout }));
  });
}

const alive = (pid: number) => existsSync(`/proc/${pid}/cmdline`) && readFileSync(`/proc/${pid}/cmdline`, 'utf8') !== '';

describe("the suite's runner", () => {
  const dir = mkdtempSync(join(tmpdir(), 'runner-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('a process a test file leaves running is killed and named, and the file fails', async () => {
    const { code, stdout } = await run(['--import', OWNER, '--test', join(FIXTURES, 'leaves-a-process.test.mjs')]);
    const pid = Number(/started pid (\d+)/.exec(stdout)?.[1]);
    assert.ok(pid > 0, stdout);
    assert.equal(code, 1, stdout);
    assert.match(stdout, new RegExp(`leftover of \\S+leaves-a-process\\.test\\.mjs: pid ${pid}: sleep 1000`));
    await waitUntil(() => !alive(pid), `the leftover sleep ${pid} is gone`);
  });

  it("what is left of a run is killed and named by the sweep, and another run's processes are not", async () => {
    const ours = spawn('sleep', ['1000'], { detached: true, stdio: 'ignore', env: { ...process.env, AGENT_RUNNER_TEST_RUN: 'ours' } });
    const theirs = spawn('sleep', ['1001'], { detached: true, stdio: 'ignore', env: { ...process.env, AGENT_RUNNER_TEST_RUN: 'theirs' } });
    try {
      const { code, stdout } = await run(['scripts/test-processes.mjs', 'sweep'], { AGENT_RUNNER_TEST_RUN: 'ours' });
      assert.equal(code, 1, stdout);
      assert.match(stdout, new RegExp(`leftover of the run: pid ${ours.pid}: sleep 1000`));
      assert.doesNotMatch(stdout, /sleep 1001/);
      await waitUntil(() => !alive(ours.pid!), 'the swept sleep is gone');
      assert.ok(alive(theirs.pid!));
    } finally {
      ours.kill('SIGKILL');
      theirs.kill('SIGKILL');
    }
  });

  it('a signal to scripts/own-session.sh (.ci/run, npm test) stops everything its command started, and it exits 143', async () => {
    const wrapper = spawn('bash', ['scripts/own-session.sh', 'bash', '-c', 'sleep 1000 & echo $!; sh -c "sleep 1001 & echo \\$!; wait" & wait'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let printed = '';
    wrapper.stdout.on('data', (chunk: Buffer) => (printed += chunk.toString()));
    const ended = new Promise<number | null>((resolve) => wrapper.on('close', resolve));
    await waitUntil(() => printed.trim().split('\n').length === 2, 'both sleeps have started');
    const pids = printed.trim().split('\n').map(Number);
    wrapper.kill('SIGTERM');
    assert.equal(await ended, 143);
    await waitUntil(() => pids.every((pid) => !alive(pid)), `the sleeps ${pids.join(', ')} are gone`);
  });

  it("keeps its place in a file's report whatever the file writes to its stdout, and kills a file at its deadline, naming it; one summary closes the run", async () => {
    const files = ['writes-frame-bytes.test.mjs', 'marks.test.mjs', 'never-ends.test.mjs'].map((name) => join(FIXTURES, name));
    const env = { MARKS_FILE: join(dir, 'deadline-marks'), AGENT_RUNNER_TEST_SLOTS_DIR: join(dir, 'deadline-slots') };
    // One deadline for all three: room for the two that pass to start and end first (a loaded CI machine needs it).
    const { code, stdout } = await run(['scripts/run-test-files.mjs', '3', '10000', ...files], env);
    assert.equal(code, 1, stdout);
    assert.match(stdout, /✔ writes a frame split after a length that ends in 0xFF/);
    assert.match(stdout, /✔ marks its start and end/);
    assert.match(stdout, /never-ends\.test\.mjs ran past its deadline of 10 s and was killed/);
    assert.equal(stdout.match(/ℹ tests \d+/g)?.join(), 'ℹ tests 3', stdout);
    assert.match(stdout, /ℹ pass 2\n/);
    assert.match(stdout, /ℹ fail 1\n/);
  });

  it("counts a file's failure that node leaves out of the file's own counts (a suite's after hook)", async () => {
    const env = { AGENT_RUNNER_TEST_SLOTS_DIR: join(dir, 'hook-slots') };
    const { code, stdout } = await run(['scripts/run-test-files.mjs', '3', '60000', join(FIXTURES, 'after-hook-fails.test.mjs')], env);
    assert.equal(code, 1, stdout);
    assert.match(stdout, /the after hook failed/);
    assert.match(stdout, /ℹ fail 1\n/);
  });

  it('reports files that run at once each whole, not interleaved within a test (the spec reporter would stop the run)', async () => {
    for (const name of ['many-a', 'many-b', 'many-c']) copyFileSync(join(FIXTURES, 'many-tests.test.mjs'), join(dir, `${name}.test.mjs`));
    const env = { AGENT_RUNNER_TEST_SLOTS_DIR: join(dir, 'many-slots') };
    const { code, stdout } = await run(['scripts/run-test-files.mjs', '3', '60000', ...['many-a', 'many-b', 'many-c'].map((name) => join(dir, `${name}.test.mjs`))], env);
    assert.equal(code, 0, stdout);
    assert.match(stdout, /ℹ tests 1200\n/);
    assert.match(stdout, /ℹ pass 1200\n/);
  });

  it('two runs at once share the machine: at most CONCURRENCY files and one heavy file at a time; each run closes with one summary', async () => {
    for (const name of ['heavy-a', 'heavy-b', 'heavy-c', 'light-a', 'light-b', 'light-c']) copyFileSync(join(FIXTURES, 'marks.test.mjs'), join(dir, `${name}.test.mjs`));
    const env = { MARKS_FILE: join(dir, 'marks'), AGENT_RUNNER_TEST_SLOTS_DIR: join(dir, 'slots'), AGENT_RUNNER_TEST_HEAVY_SLOTS: '1' };
    const runner = (files: string[]) => run(['scripts/run-test-files.mjs', '2', '60000', ...files.map((file) => (file.startsWith('--') ? file : join(dir, file)))], env);
    const [first, second] = await Promise.all([
      runner(['light-a.test.mjs', 'light-b.test.mjs', '--heavy', 'heavy-a.test.mjs', 'heavy-b.test.mjs']),
      runner(['light-c.test.mjs', '--heavy', 'heavy-c.test.mjs']),
    ]);
    assert.equal(first.code, 0, first.stdout);
    assert.equal(second.code, 0, second.stdout);
    const marks = readFileSync(env.MARKS_FILE, 'utf8').trim().split('\n');
    let running = 0;
    for (const mark of marks) {
      running += mark.startsWith('start') ? 1 : -1;
      assert.ok(running <= 2, `more than 2 files ran at once: ${marks.join(', ')}`);
    }
    const heavyMarks = marks.filter((line) => line.includes('heavy'));
    assert.equal(heavyMarks.length, 6);
    for (let index = 0; index < heavyMarks.length; index += 2) {
      assert.equal(heavyMarks[index + 1], heavyMarks[index]!.replace('start', 'end'), `a heavy file started while another ran: ${heavyMarks.join(', ')}`);
    }
    assert.equal(first.stdout.match(/ℹ tests \d+/g)?.join(), 'ℹ tests 4');
    assert.match(first.stdout, /ℹ pass 4\n/);
    assert.equal(second.stdout.match(/ℹ tests \d+/g)?.join(), 'ℹ tests 2');
  });
});
