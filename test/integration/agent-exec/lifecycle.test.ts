import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { agentExec, ok, pgrep, jobDirs, UNTIL_IT_ENDS } from '../../helpers/agent-exec.js';
import { waitUntil } from '../../helpers/wait.js';

const CLI = fileURLToPath(new URL('../../../dist/cli/agent-exec.js', import.meta.url));
/**
 * Prints "line 0" and "line 1", then waits until the file `slow-job.go` appears in its cwd before
 * printing "line 2".."line 49": a job that is still running when run answers, however slow the
 * machine, until the test lets it finish.
 */
const SLOW = ['sh', '-c', 'i=0; while [ $i -lt 50 ]; do echo "line $i"; i=$((i+1)); while [ $i -ge 2 ] && [ ! -e slow-job.go ]; do sleep 0.05; done; done # slow-lifecycle-job'];

describe('agent-exec lifecycle with real processes', () => {
  const { root, cwd } = jobDirs('agent-exec-life');

  it('run watches a quick job to its end: state, exit code, both streams, logs, compression, snapshot', async () => {
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--', 'sh', '-c', 'echo out; echo err >&2; exit 3']);
    assert.equal(response.type, 'run');
    assert.equal(response.state, 'exited');
    assert.equal(response.exit_code, 3);
    assert.equal(response.stdout, 'out\n');
    assert.equal(response.stderr, 'err\n');
    assert.deepEqual(
      [response.stdout_range, response.stderr_range],
      [
        [0, 4],
        [0, 4],
      ],
    );
    assert.deepEqual([response.stdout_total_bytes, response.stderr_total_bytes], [4, 4]);
    assert.equal(response.encoding, 'utf-8');
    assert.deepEqual(response.env_vars, []);
    const compression = response.compression as { mode: string; stdout_original_bytes: number };
    assert.equal(compression.mode, 'route');
    assert.equal(compression.stdout_original_bytes, 4);
    assert.deepEqual(response.snapshot, {
      stdout_tail: 'out\n',
      stderr_tail: 'err\n',
      truncated: false,
      encoding: 'utf-8',
      stdout_observed_bytes: 4,
      stderr_observed_bytes: 4,
      stdout_included_bytes: 4,
      stderr_included_bytes: 4,
    });
    assert.equal(readFileSync(response.stdout_log_path as string, 'utf8'), 'out\n');
    assert.equal(readFileSync(response.stderr_log_path as string, 'utf8'), 'err\n');
    const full = readFileSync(response.full_log_path as string, 'utf8')
      .split('\n')
      .filter(Boolean);
    assert.equal(full.length, 2);
    for (const line of full) assert.match(line, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (stdout out|stderr err)$/);
  });

  it('--compress picks the mode; the raw excerpt stays beside it', async () => {
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--compress', 'off', '--', 'sh', '-c', 'echo plain']);
    assert.equal((response.compression as { mode: string; applied: boolean }).mode, 'off');
    assert.equal(response.stdout, 'plain\n');
  });

  it('run, status, tail, wait, kill, restart and list on one job that outlives the CLI', async () => {
    const run = await ok(root, ['run', '--cwd', cwd, '--until', '1', '--tail-lines', '2', '--', ...SLOW]);
    const id = run.job_id;
    assert.equal(run.state, 'running');
    assert.ok((run.waited_ms as number) >= 900, `waited ${run.waited_ms} ms`);
    // Within run's 1 s a loaded machine may not have started the job yet: run's excerpt and its
    // snapshot are checked against each other, the job's two lines once it has printed them.
    assert.ok('line 0\nline 1\n'.startsWith(run.stdout), `run saw ${JSON.stringify(run.stdout)}`);
    assert.equal(run.stdout_range[0], 0);
    assert.equal(run.stdout_range[1], run.stdout_total_bytes);
    assert.equal((run.snapshot as { stdout_tail: string }).stdout_tail, run.stdout);
    let printed = '';
    await waitUntil(async () => (printed = (await ok(root, ['tail', id])).stdout) === 'line 0\nline 1\n', 'the job has printed its first two lines', { seen: () => printed });

    const status = await ok(root, ['status', id.slice(0, 6)]);
    assert.equal(status.job_id, id);
    assert.equal(status.state, 'running');
    assert.equal(status.finished_at, null);
    assert.deepEqual(status.argv, SLOW);

    const first = await ok(root, ['tail', id, '--offset-stdout', '0', '--max-bytes', '7']);
    assert.equal(first.stdout, 'line 0\n');
    assert.deepEqual(first.stdout_range, [0, 7]);
    const second = await ok(root, ['tail', id, '--offset-stdout', String(first.stdout_range[1]), '--max-bytes', '7']);
    assert.equal(second.stdout, 'line 1\n');
    assert.deepEqual(second.stdout_range, [7, 14]);
    const end = await ok(root, ['tail', id, '--max-bytes', '7']);
    assert.equal(end.stdout_range[1] - end.stdout_range[0], 7);
    assert.ok(end.stdout_range[1] <= end.stdout_total_bytes);

    const early = await ok(root, ['wait', id, '--until', '0.3']);
    assert.equal(early.state, 'running');
    assert.ok((early.waited_ms as number) >= 250);

    const kill = await ok(root, ['kill', id]);
    assert.equal(kill.state, 'killed');
    assert.equal(kill.signal, 'SIGTERM');
    assert.equal(kill.signalled, true);
    assert.equal(kill.reason, 'kill');
    assert.deepEqual(pgrep('slow-lifecycle-job'), []);
    const killed = await ok(root, ['status', id]);
    assert.equal(killed.state, 'killed');
    assert.ok(killed.finished_at);

    const restart = await ok(root, ['restart', id.slice(0, 5), '--no-wait']);
    assert.equal(restart.type, 'restart');
    assert.equal(restart.job_id, id);
    assert.equal(restart.state, 'running');
    writeFileSync(join(cwd, 'slow-job.go'), '');
    const done = await ok(root, ['wait', id, '--forever']);
    assert.equal(done.state, 'exited');
    assert.equal(done.exit_code, 0);
    // The logs started empty: one pass of the 50 lines, not what the killed run printed as well.
    const log = readFileSync(restart.stdout_log_path as string, 'utf8');
    assert.equal(log, Array.from({ length: 50 }, (_, i) => `line ${i}\n`).join(''));

    const list = await ok(root, ['list']);
    const jobs = list.jobs as Array<{ job_id: string; state: string }>;
    assert.equal(jobs[0]!.job_id, id, 'the restarted job started last');
    assert.equal(list.root, root);
  });

  it('--no-wait answers at once while the job keeps going, with its logs already there', async () => {
    // The job waits for a file the test writes only after the answer: it cannot have ended.
    const response = await ok(root, ['run', '--cwd', cwd, '--no-wait', '--', 'sh', '-c', 'while [ ! -e no-wait.go ]; do sleep 0.05; done']);
    assert.equal(response.state, 'running');
    assert.ok((response.waited_ms as number) < 200);
    for (const path of [response.stdout_log_path, response.stderr_log_path, response.full_log_path]) assert.ok(existsSync(path as string));
    writeFileSync(join(cwd, 'no-wait.go'), '');
    const done = await ok(root, ['wait', response.job_id, ...UNTIL_IT_ENDS]);
    assert.equal(done.state, 'exited');
  });

  it("a background job does not hold the caller's inherited fds open (a caller reading to EOF would hang)", async () => {
    // The CLI gets a pipe as fd 20, past a gap and without close-on-exec, as shells and agents'
    // harnesses leave theirs (node itself marks low fds close-on-exec); `cat` ends only once
    // every holder of that pipe has closed it. The CLI's stdout goes to stderr, read from there.
    // The job outlives the test (it is killed at the end): if it held the pipe, `cat` would not
    // end until it did, and the job would no longer be running.
    const shell = spawn('/bin/bash', ['-c', '"$@" 20>&1 1>&2 | cat', 'sh', process.execPath, CLI, 'run', '--cwd', cwd, '--no-wait', '--sandbox', 'none', '--', 'sleep', '120'], {
      env: { ...process.env, AGENT_EXEC_ROOT: root },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const output: Buffer[] = [];
    shell.stderr!.on('data', (chunk: Buffer) => output.push(chunk));
    await once(shell, 'close');
    const response = JSON.parse(Buffer.concat(output).toString('utf8')) as { job_id: string };
    assert.equal((await ok(root, ['status', response.job_id])).state, 'running', 'the pipe reached EOF when the CLI exited, not when the job did');
    assert.equal((await ok(root, ['kill', response.job_id, '--signal', 'KILL'])).state, 'killed');
  });

  it('a command that cannot be found is command_not_found, and nothing is created', async () => {
    const before = (await ok(root, ['list'])).jobs as unknown[];
    const { code, response } = await agentExec(root, ['run', '--cwd', cwd, '--', 'no-such-command-here']);
    assert.equal(code, 1);
    assert.equal(response.error.code, 'command_not_found');
    assert.equal(((await ok(root, ['list'])).jobs as unknown[]).length, before.length);
  });
});
