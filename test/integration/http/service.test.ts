import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { api, apiHeadersOnly, startServer, waitForStatus, waitTerminal, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';
import { makeWorkspace } from '../../helpers/workspace.js';
import { hostProcessesMatching } from '../../helpers/processes.js';

/**
 * The service end to end: a job through the worker process and its sandbox, artifacts,
 * cancel, snippets and tasks, auth, from a real socket. The HTTP contract (status codes,
 * validation, media types, paging, queue limits) is checked in-process in
 * test/unit/http/service.test.ts.
 */
describe('HTTP service', () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(['--concurrency', '2', '--body-limit-mb', '1']);
  });
  after(() => server.stop());

  it('queues a job (202), long-polls it to its terminal result, and lists it', async () => {
    const submitted = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'via http'] }, trace: { trace_id: 'tr-http-1' } });
    assert.equal(submitted.status, 202);
    assert.equal(submitted.json.status, 'queued');
    const state = await waitTerminal(server.url, submitted.json.job_id);
    assert.equal(state.status, 'completed');
    assert.equal(state.result.stdout.text, 'via http\n');
    assert.equal(state.result.trace.trace_id, 'tr-http-1');
    const list = await api(server.url, 'GET', '/v1/jobs?limit=100');
    assert.ok(list.json.jobs.some((job: { job_id: string }) => job.job_id === submitted.json.job_id));
    // The log line is written after the job turned terminal, through another pipe than the answer.
    const finished = (entry: string) => entry.includes(submitted.json.job_id) && entry.includes('job finished');
    await waitUntil(() => server.logs.some(finished), 'the server logged the job as finished');
    const line = server.logs.find(finished);
    assert.ok(line && JSON.parse(line).trace_id === 'tr-http-1', 'log lines carry job and trace ids');
  });

  it('answers 413 over the body limit from the Content-Length alone', async () => {
    // 2 MiB announced against the 1 MiB limit. The body is never sent: the server must refuse
    // from the header, and a client still writing a body it refuses would race its close.
    const huge = await apiHeadersOnly(server.url, 'POST', '/v1/jobs', { 'content-type': 'application/json', 'content-length': String(2 * 1024 * 1024) });
    assert.equal(huge.status, 413);
    assert.equal(huge.json.error.code, 'request.too_large');
  });

  it('reports a policy denial as a terminal result, not an HTTP error', async () => {
    const submitted = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['bash', '-c', 'id'] } });
    assert.equal(submitted.status, 202);
    const state = await waitTerminal(server.url, submitted.json.job_id);
    assert.equal(state.status, 'policy_denied');
    assert.equal(state.result.error.code, 'policy.shell_denied');
  });

  it('lists artifacts of a terminal job and serves their bytes', async () => {
    const workspace = makeWorkspace({ 'make.py': 'open("report.txt", "w").write("artifact body")\n' });
    const submitted = await api(server.url, 'POST', '/v1/jobs', {
      workspace: { source: 'local_path', path: workspace },
      command: { argv: ['python3', 'make.py'] },
      artifacts: ['*.txt'],
    });
    await waitTerminal(server.url, submitted.json.job_id);
    const listed = await api(server.url, 'GET', `/v1/jobs/${submitted.json.job_id}/artifacts`);
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.json.artifacts.map((artifact: { path: string }) => artifact.path),
      ['report.txt'],
    );
    const download = await api(server.url, 'GET', `/v1/jobs/${submitted.json.job_id}/artifacts/report.txt`);
    assert.equal(download.status, 200);
    assert.equal(download.text, 'artifact body');
    assert.equal(download.headers.get('x-artifact-sha256'), createHash('sha256').update('artifact body').digest('hex'));
    const traversal = await api(server.url, 'GET', `/v1/jobs/${submitted.json.job_id}/artifacts/..%2F..%2Frequest.json`);
    assert.equal(traversal.status, 404);
  });

  it('cancels a running job (whole tree killed) and a queued one', async () => {
    const marker = `cancel-${randomUUID().slice(0, 8)}`;
    const running = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['bash', '-c', `exec -a ${marker} sleep 60`] }, policy: { allow_shell: true } });
    // Fill both workers, so the next one waits in the queue (the filler outlasts the test: it
    // is canceled at the end, so the queued job cannot start however slow the machine is).
    const filler = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['sleep', '60'] } });
    const queued = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'never'] } });
    await waitForStatus(server.url, running.json.job_id, 'running');
    const canceledQueued = await api(server.url, 'POST', `/v1/jobs/${queued.json.job_id}/cancel`);
    assert.equal(canceledQueued.json.status, 'canceled');
    const canceledRunning = await api(server.url, 'POST', `/v1/jobs/${running.json.job_id}/cancel`);
    assert.equal(canceledRunning.json.status, 'canceled');
    assert.deepEqual(hostProcessesMatching(marker), []);
    const queuedState = await waitTerminal(server.url, queued.json.job_id);
    assert.equal(queuedState.result.error.code, 'run.canceled');
    assert.equal(queuedState.result.exit_code, null);
    await api(server.url, 'POST', `/v1/jobs/${filler.json.job_id}/cancel`);
    await waitTerminal(server.url, filler.json.job_id);
  });

  it('cancels a job asked to stop right after it was submitted, however the cancel meets its lease', async () => {
    // A cancel can reach the worker process while it is being handed the job: it must not be
    // lost (the job would then run its whole 30 s and end completed).
    for (let attempt = 0; attempt < 25; attempt++) {
      const submitted = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['sleep', '30'] } });
      const canceled = await api(server.url, 'POST', `/v1/jobs/${submitted.json.job_id}/cancel`);
      assert.equal(canceled.json.status, 'canceled', `attempt ${attempt}: ${canceled.text}`);
    }
  });

  it('runs the snippet contract synchronously on /v1/exec', async () => {
    const ok = await api(server.url, 'POST', '/v1/exec', { trace_id: 'tr-exec', lang: 'python', code: 'print(6 * 7)', timeout: 10 });
    assert.equal(ok.status, 200);
    const { usage, ...response } = ok.json;
    assert.deepEqual(response, { trace_id: 'tr-exec', stdout: '42\n', stderr: '', exit_code: 0, error: '' });
    assert.deepEqual(Object.keys(usage).sort(), ['cpu_system_ms', 'cpu_user_ms', 'peak_memory_bytes', 'wall_ms']);
    assert.ok(usage.wall_ms > 0 && usage.peak_memory_bytes > 0, JSON.stringify(usage));
    const invalid = await api(server.url, 'POST', '/v1/exec', { lang: 'python', code: 'x', timeout: -1 });
    assert.equal(invalid.json.exit_code, 2);
    assert.match(invalid.json.error, /timeout must be a positive number/);
  });

  it('runs code tasks synchronously on /v1/tasks, 422 for an invalid one', async () => {
    const ok = await api(server.url, 'POST', '/v1/tasks', {
      task_id: 't-http',
      lang: 'python',
      mode: 'per_item',
      code: 'print("seen", _item["json"]["n"])\nreturn {"double": _item["json"]["n"] * 2}',
      items: [{ json: { n: 1 } }, { json: { n: 2 } }],
    });
    assert.equal(ok.status, 200);
    const { usage: taskUsage, ...answer } = ok.json;
    assert.ok(taskUsage.wall_ms > 0, JSON.stringify(taskUsage));
    assert.deepEqual(answer, {
      task_id: 't-http',
      result: [
        { json: { double: 2 }, pairedItem: { item: 0 } },
        { json: { double: 4 }, pairedItem: { item: 1 } },
      ],
      print_args: [
        ["'seen'", '1'],
        ["'seen'", '2'],
      ],
    });
    const invalid = await api(server.url, 'POST', '/v1/tasks', { lang: 'ruby', mode: 'all_items', code: '', items: [] });
    assert.equal(invalid.status, 422);
    assert.equal(invalid.json.error.code, 'validation.invalid_request');
  });
});

describe('HTTP service security', () => {
  it('requires the bearer token on every route but /health', async () => {
    const token = randomUUID();
    const server = await startServer(['--token', token]);
    try {
      assert.equal((await api(server.url, 'GET', '/health')).status, 200);
      const denied = await api(server.url, 'GET', '/v1/jobs', undefined, { authorization: null });
      assert.equal(denied.status, 401);
      assert.equal(denied.json.error.code, 'auth.unauthorized');
      assert.equal((await api(server.url, 'GET', '/v1/jobs', undefined, { authorization: 'Bearer wrong' })).status, 401);
      assert.equal((await api(server.url, 'GET', '/v1/jobs', undefined, { authorization: `Bearer ${token}` })).status, 200);
      assert.ok(!server.logs.some((line) => line.includes(token)), 'the token never reaches the logs');
    } finally {
      await server.stop();
    }
  });

  it('refuses to listen beyond loopback without authentication', async () => {
    await assert.rejects(startServer(['--addr', '0.0.0.0:0', '--no-auth']), /refusing to listen on 0\.0\.0\.0 without authentication/);
  });
});
