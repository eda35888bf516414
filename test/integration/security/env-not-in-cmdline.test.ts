import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { runJob } from '../../../src/runner/run-job.js';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { ok, jobDirs } from '../../helpers/agent-exec.js';
import { testRuntime } from '../../helpers/runtime.js';

/** Every host process's command line, as `ps` shows them to any user. */
function allCommandLines(): string[] {
  const lines: string[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      lines.push(readFileSync(`/proc/${name}/cmdline`).toString('utf8').split('\0').join(' '));
    } catch {
      // Gone while we looked.
    }
  }
  return lines;
}

/**
 * Samples the command lines while `job` runs, until a process carrying `beacon` (a unique
 * argument of the job's own argv) has been seen, so the check covers the job while it lives.
 */
async function commandLinesDuring(beacon: string, job: Promise<unknown>): Promise<string[]> {
  let done = false;
  void job.finally(() => (done = true));
  const seen: string[] = [];
  let sawJob = false;
  while (!done) {
    const lines = allCommandLines();
    seen.push(...lines);
    sawJob ||= lines.some((line) => line.includes(beacon));
    await sleep(10);
  }
  await job;
  assert.ok(sawJob, `the job (${beacon}) was never seen running`);
  return seen;
}

function assertNoneShows(lines: readonly string[], text: string): void {
  const showing = lines.filter((line) => line.includes(text));
  assert.equal(showing.length, 0, `${JSON.stringify(text)} shows in a command line: ${showing[0]?.slice(0, 400)}`);
}

const runtime = testRuntime();
after(() => runtime.dispose());

describe('environment values never appear in a host command line', () => {
  it('run jobs: the request env reaches the job, not /proc/*/cmdline', async () => {
    const secret = `secret-${randomUUID()}`;
    const beacon = `0.${Date.now()}`;
    const job = runJob(
      { command: { argv: ['sh', '-c', `printf %s "$TOKEN"; sleep ${beacon}`], env: { TOKEN: secret } }, policy: { allowed_env: ['TOKEN'], allow_shell: true } },
      { runtime },
    );
    const lines = await commandLinesDuring(beacon, job);
    assert.equal((await job).stdout.text, secret, 'the job got its env');
    assertNoneShows(lines, secret);
    assertNoneShows(lines, '--setenv');
  });

  it('snippets: the language environment travels the same way', async () => {
    const beacon = `0.${Date.now()}7`;
    const job = executeSnippet({ lang: 'bash', code: `echo "$LANG"; sleep ${beacon}` }, { runtime });
    const lines = await commandLinesDuring(beacon, job);
    assert.equal((await job).stdout, 'C.UTF-8\n');
    assertNoneShows(lines, '--setenv');
  });

  describe('agent-exec jobs', () => {
    const { root, cwd } = jobDirs('agent-exec-env-cmdline');

    it('an --env-file value reaches the job, not /proc/*/cmdline', async () => {
      const secret = `secret-${randomUUID()}`;
      const envFile = join(cwd, 'job.env');
      writeFileSync(envFile, `TOKEN=${secret}\n`);
      const beacon = `0.${Date.now()}3`;
      const job = ok(root, ['run', '--cwd', cwd, '--env-file', envFile, '--until', '30', '--', 'sh', '-c', `printf %s "$TOKEN"; sleep ${beacon}`]);
      const lines = await commandLinesDuring(beacon, job);
      assert.equal((await job).stdout, secret);
      assertNoneShows(lines, secret);
    });
  });
});
