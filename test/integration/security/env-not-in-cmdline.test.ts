import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { runJob } from '../../../src/runner/run-job.js';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { ok, jobDirs, UNTIL_IT_ENDS } from '../../helpers/agent-exec.js';
import { testRuntime } from '../../helpers/runtime.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from '../../helpers/timeouts.js';

/** Every host process's command line, as `ps` shows them to any user, by pid. */
function allCommandLines(): Map<number, string> {
  const lines = new Map<number, string>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      lines.set(Number(name), readFileSync(`/proc/${name}/cmdline`).toString('utf8').split('\0').join(' '));
    } catch {
      // Gone while we looked.
    }
  }
  return lines;
}

/**
 * A job's last command, `sleep BEACON || true`: a unique argument that lives a minute, however
 * long a scan of /proc takes on a loaded machine, and ends (killed from here) once it was seen.
 */
function beaconSleep(): { beacon: string; command: string } {
  const beacon = `60.${Date.now()}${randomInt(1000)}`;
  return { beacon, command: `sleep ${beacon} || true` };
}

/**
 * Samples the command lines while `job` runs, until a process carrying `beacon` (a unique
 * argument of the job's own argv) has been seen, so the check covers the job while it lives;
 * then ends the job's `sleep BEACON` (beaconSleep), so it ends as soon as it was seen.
 */
async function commandLinesDuring(beacon: string, job: Promise<unknown>): Promise<string[]> {
  let done = false;
  void job.finally(() => (done = true));
  const seen: string[] = [];
  let sawJob = false;
  while (!done) {
    const lines = allCommandLines();
    seen.push(...lines.values());
    for (const [pid, line] of lines) {
      if (!line.includes(beacon)) continue;
      sawJob = true;
      if (line.trim() === `sleep ${beacon}`) process.kill(pid, 'SIGTERM');
    }
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
    const { beacon, command } = beaconSleep();
    const job = runJob(
      { command: { argv: ['sh', '-c', `printf %s "$TOKEN"; ${command}`], env: { TOKEN: secret } }, policy: { allowed_env: ['TOKEN'], allow_shell: true } },
      { runtime },
    );
    const lines = await commandLinesDuring(beacon, job);
    assert.equal((await job).stdout.text, secret, 'the job got its env');
    assertNoneShows(lines, secret);
    assertNoneShows(lines, '--setenv');
  });

  it('snippets: the language environment travels the same way', async () => {
    const { beacon, command } = beaconSleep();
    const job = executeSnippet({ lang: 'bash', code: `echo "$LANG"; ${command}`, timeout: NOT_THE_SUBJECT_TIMEOUT_S }, { runtime });
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
      const { beacon, command } = beaconSleep();
      const job = ok(root, ['run', '--cwd', cwd, '--env-file', envFile, ...UNTIL_IT_ENDS, '--', 'sh', '-c', `printf %s "$TOKEN"; ${command}`]);
      const lines = await commandLinesDuring(beacon, job);
      assert.equal((await job).stdout, secret);
      assertNoneShows(lines, secret);
    });
  });
});
