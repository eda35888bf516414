import assert from 'node:assert/strict';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { postWithRetries, runCommand, type NotifyBounds } from '../../../src/agent-exec/notify.js';
import { checkResponse, jobDirs, ok, pgrep, tempDir, UNTIL_IT_ENDS } from '../../helpers/agent-exec.js';
import { waitUntil } from '../../helpers/wait.js';

/** A local endpoint: each request's body, answered with the next status of `statuses` (the last one repeats), or never. */
async function endpoint(statuses: Array<number | 'hang'>): Promise<{ url: string; bodies: string[]; server: Server }> {
  const bodies: string[] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      const status = statuses[Math.min(bodies.length, statuses.length) - 1]!;
      if (status !== 'hang') response.writeHead(status).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies, server };
}

/** Told after the record is final; the supervisor exits once all are told. */
async function notified(root: string, jobId: string): Promise<void> {
  await waitUntil(() => pgrep(`__supervise ${join(root, 'jobs', jobId)}`).length === 0, 'the supervisor has notified and exited');
}

/** A directory of the test's own, outside every job's view, removed after the file's tests. */
function outsideDir(parent: string, prefix: string): string {
  const dir = mkdtempSync(join(parent, prefix));
  after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe('agent-exec --notify-url and --notify-command', () => {
  const { root, cwd } = jobDirs('agent-exec-notify');

  it('when the job ends, POST its final status JSON (retrying a 503) and run the command with it on stdin, each exactly once, in a private directory of its own', async () => {
    const hook = await endpoint([503, 200]);
    const out = tempDir('agent-exec-notify-out-');
    after(() => rmSync(out, { recursive: true, force: true }));
    const command = `cat > ${out}/notified.json; pwd > ${out}/pwd.txt; stat -c %a . > ${out}/mode.txt`;
    const args = ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--sandbox', 'none', '--notify-url', hook.url, '--notify-command', command, '--', 'sh', '-c', 'echo done; exit 3'];
    const run = await ok(root, args);
    assert.equal(run.state, 'exited');
    await notified(root, run.job_id);
    assert.equal(hook.bodies.length, 2, 'one 503, retried once, then delivered: no more');
    assert.equal(hook.bodies[0], hook.bodies[1]);
    const status = checkResponse(['notify'], hook.bodies[1]!, '');
    assert.deepEqual([status.type, status.job_id, status.state, status.exit_code, status.stdout_total_bytes], ['status', run.job_id, 'exited', 3, 5]);
    assert.deepEqual(JSON.parse(readFileSync(join(out, 'notified.json'), 'utf8')), status);
    assert.deepEqual(await ok(root, ['status', run.job_id]), status, 'the same JSON status prints');
    const hookDir = readFileSync(join(out, 'pwd.txt'), 'utf8').trim();
    assert.notEqual(hookDir, cwd, "never in the job's cwd");
    assert.equal(readFileSync(join(out, 'mode.txt'), 'utf8').trim(), '700');
    assert.equal(existsSync(hookDir), false, 'its directory is removed afterwards');
  });

  // The job runs sandboxed, as root (it keeps uid 0 for its cwd); the hook is the caller's, on the host.
  it("a link the job plants in its cwd is not followed by docs/agent-exec.md's command: a root-only file outside the job's view stays as it was", async () => {
    const victimDir = outsideDir('/var/tmp', 'agent-exec-victim-');
    const victim = join(victimDir, 'victim.txt');
    writeFileSync(victim, 'root only\n');
    chmodSync(victim, 0o600);
    const plant = `import os; os.symlink(${JSON.stringify(victim)}, 'ends.txt')`;
    const run = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--notify-command', 'jq .state >> ends.txt', '--', 'python3', '-c', plant]);
    assert.deepEqual([run.state, run.exit_code], ['exited', 0], JSON.stringify(run));
    await notified(root, run.job_id);
    assert.equal(readFileSync(victim, 'utf8'), 'root only\n');
    assert.equal(statSync(victim).mode & 0o777, 0o600);
  });

  it('a repository the job makes of its cwd does not run its core.fsmonitor on the host when the hook runs git', async () => {
    const marker = join(outsideDir(tmpdir(), 'agent-exec-notify-marker-'), 'fsmonitor-ran');
    const repoDir = outsideDir(tmpdir(), 'agent-exec-notify-repo-');
    const configure = `git init -q . && touch tracked && git add tracked && git config core.fsmonitor 'id > ${marker}; true'`;
    const run = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', repoDir, '--notify-command', 'git status > /dev/null 2>&1; true', '--', 'sh', '-c', configure]);
    assert.deepEqual([run.state, run.exit_code], ['exited', 0], JSON.stringify(run));
    await notified(root, run.job_id);
    assert.equal(existsSync(marker), false, `the job's fsmonitor ran on the host: ${existsSync(marker) ? readFileSync(marker, 'utf8') : ''}`);
  });

  it('neither can hold the supervisor forever: retries stop at their bounds, a stuck command is killed with its group', async () => {
    // Bounds in time a loaded machine never reaches, where the count of attempts is checked: an
    // attempt of 300 ms once timed out before its request reached the endpoint, on a 2-core CI run.
    const bounds: NotifyBounds = { attempts: 3, firstRetryMs: 50, attemptTimeoutMs: 30_000, totalMs: 60_000, commandTimeoutMs: 300 };
    const failing = await endpoint([503]);
    assert.deepEqual(await postWithRetries(failing.url, '{}', bounds), { delivered: false, attempts: 3, detail: 'not delivered after 3 attempts: HTTP 503' });
    assert.equal(failing.bodies.length, 3);
    const refusing = await endpoint([404]);
    assert.equal((await postWithRetries(refusing.url, '{}', bounds)).attempts, 1, 'a 404 is not retried');
    // Each attempt at an endpoint that never answers lasts its full 300 ms, so the total of 1 s
    // ends the retries long before their count would.
    const hanging = await endpoint(['hang']);
    const unanswered = await postWithRetries(hanging.url, '{}', { ...bounds, attempts: 10, attemptTimeoutMs: 300, totalMs: 1000 });
    assert.equal(unanswered.delivered, false);
    assert.ok(unanswered.attempts < 10, `the total bound holds, whatever the attempts: ${JSON.stringify(unanswered)}`);

    // Durations no other test's sleeps have: a `sleep 60` of a job in another file once held this wait for 50 s.
    const outcome = await runCommand(`sleep 6071 & sleep 6072; echo never > ${cwd}/never.txt`, '{}', { timeoutMs: bounds.commandTimeoutMs });
    assert.equal(outcome, 'killed after 300 ms');
    await waitUntil(() => pgrep('sleep 607[12]$').length === 0, 'what the command started is gone too');
    assert.equal(existsSync(join(cwd, 'never.txt')), false);
  });
});
