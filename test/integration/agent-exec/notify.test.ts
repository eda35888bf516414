import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { postWithRetries, runCommand, type NotifyBounds } from '../../../src/agent-exec/notify.js';
import { checkResponse, jobDirs, ok, pgrep } from '../../helpers/agent-exec.js';
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

describe('agent-exec --notify-url and --notify-command', () => {
  const { root, cwd } = jobDirs('agent-exec-notify');

  it('when the job ends, POST its final status JSON (retrying a 503) and run the command with it on stdin, each exactly once', async () => {
    const hook = await endpoint([503, 200]);
    const args = ['run', '--cwd', cwd, '--sandbox', 'none', '--notify-url', hook.url, '--notify-command', 'cat > notified.json', '--', 'sh', '-c', 'echo done; exit 3'];
    const run = await ok(root, args);
    assert.equal(run.state, 'exited');
    // Told after the record is final; the supervisor exits once both are done.
    await waitUntil(() => pgrep(`__supervise ${join(root, 'jobs', run.job_id)}`).length === 0, 'the supervisor has notified and exited');
    assert.equal(hook.bodies.length, 2, 'one 503, retried once, then delivered: no more');
    assert.equal(hook.bodies[0], hook.bodies[1]);
    const status = checkResponse(['notify'], hook.bodies[1]!, '');
    assert.deepEqual([status.type, status.job_id, status.state, status.exit_code, status.stdout_total_bytes], ['status', run.job_id, 'exited', 3, 5]);
    assert.deepEqual(JSON.parse(readFileSync(join(cwd, 'notified.json'), 'utf8')), status);
    assert.deepEqual(await ok(root, ['status', run.job_id]), status, 'the same JSON status prints');
  });

  it('neither can hold the supervisor forever: retries stop at their bounds, a stuck command is killed with its group', async () => {
    const bounds: NotifyBounds = { attempts: 3, firstRetryMs: 50, attemptTimeoutMs: 300, totalMs: 2000, commandTimeoutMs: 300 };
    const failing = await endpoint([503]);
    assert.deepEqual(await postWithRetries(failing.url, '{}', bounds), { delivered: false, attempts: 3, detail: 'not delivered after 3 attempts: HTTP 503' });
    assert.equal(failing.bodies.length, 3);
    const refusing = await endpoint([404]);
    assert.equal((await postWithRetries(refusing.url, '{}', bounds)).attempts, 1, 'a 404 is not retried');
    const hanging = await endpoint(['hang']);
    const started = Date.now();
    assert.equal((await postWithRetries(hanging.url, '{}', { ...bounds, attempts: 10, totalMs: 1000 })).delivered, false);
    assert.ok(Date.now() - started < 1500, 'the total bound holds, whatever the attempts');

    const outcome = await runCommand('sleep 60 & sleep 61; echo never > never.txt', '{}', { cwd, timeoutMs: bounds.commandTimeoutMs });
    assert.equal(outcome, 'killed after 300 ms');
    await waitUntil(() => pgrep('sleep 6[01]$').length === 0, 'what the command started is gone too');
    assert.equal(existsSync(join(cwd, 'never.txt')), false);
  });
});
