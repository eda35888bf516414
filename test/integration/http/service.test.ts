import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { api, apiHeadersOnly, startServer, waitForStatus, waitTerminal, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';
import { makeWorkspace } from '../../helpers/workspace.js';
import { hostProcessesMatching } from '../../helpers/processes.js';

describe('HTTP service', () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(['--concurrency', '2', '--body-limit-mb', '1']);
  });
  after(() => server.stop());

  it('answers /health with queue depth and running count', async () => {
    const { status, json } = await api(server.url, 'GET', '/health');
    assert.equal(status, 200);
    assert.equal(json.status, 'ok');
    assert.deepEqual(Object.keys(json.queue).sort(), ['accepting', 'capacity', 'concurrency', 'depth', 'running']);
    assert.deepEqual(json.exec, { running: 0, waiting: 0, concurrency: 2 });
  });

  it('counts snippets and tasks in flight on /health: running in the shared slots, and waiting for one', async () => {
    // Three snippets for two slots: two run while the third waits. Each sleeps 3 s in its
    // sandbox, a window the polls below see them in; nothing is asserted of time.
    const snippet = { lang: 'python', code: 'import time\ntime.sleep(3)', timeout: 60 };
    const answers = [1, 2, 3].map(() => api(server.url, 'POST', '/v1/exec', snippet));
    await waitUntil(async () => {
      const { exec } = (await api(server.url, 'GET', '/health')).json;
      return exec.running === 2 && exec.waiting === 1 && exec.concurrency === 2;
    }, '/health counts 2 snippets running and 1 waiting');
    for (const answer of await Promise.all(answers)) assert.equal(answer.json.exit_code, 0, answer.text);
    assert.deepEqual((await api(server.url, 'GET', '/health')).json.exec, { running: 0, waiting: 0, concurrency: 2 });
  });

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

  it('answers a duplicate job_id with 409 and the existing status', async () => {
    const jobId = `dup-${randomUUID()}`;
    assert.equal((await api(server.url, 'POST', '/v1/jobs', { job_id: jobId, command: { argv: ['true'] } })).status, 202);
    const again = await api(server.url, 'POST', '/v1/jobs', { job_id: jobId, command: { argv: ['true'] } });
    assert.equal(again.status, 409);
    assert.equal(again.json.error.code, 'job.duplicate');
    assert.equal(again.json.job_id, jobId);
    assert.ok(['queued', 'running', 'completed'].includes(again.json.status));
  });

  it('answers 422 naming the field, 404 for unknown jobs, 413 over the body limit', async () => {
    const invalid = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'], cwd: 7 } });
    assert.equal(invalid.status, 422);
    assert.equal(invalid.json.error.code, 'validation.invalid_request');
    assert.match(invalid.json.error.message, /command\.cwd must be a string/);
    assert.equal(invalid.json.error.details.field, 'command.cwd');
    const escape = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'], cwd: '../..' } });
    assert.equal(escape.status, 422);
    assert.equal(escape.json.error.code, 'validation.path_escape');
    const notJson = await api(server.url, 'POST', '/v1/jobs', '{nope');
    assert.equal(notJson.status, 422);
    const missing = await api(server.url, 'GET', '/v1/jobs/job_does_not_exist');
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.code, 'job.not_found');
    // 2 MiB announced against the 1 MiB limit. The body is never sent: the server must refuse
    // from the header, and a client still writing a body it refuses would race its close.
    const huge = await apiHeadersOnly(server.url, 'POST', '/v1/jobs', { 'content-type': 'application/json', 'content-length': String(2 * 1024 * 1024) });
    assert.equal(huge.status, 413);
    assert.equal(huge.json.error.code, 'request.too_large');
  });

  it('answers 415 request.unsupported_media_type to a body that is not JSON on the JSON routes, before reading it', async () => {
    const send = (path: string, headers: Record<string, string>, body: string) =>
      fetch(`${server.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${server.token}`, ...headers }, body: new TextEncoder().encode(body) });
    for (const path of ['/v1/jobs', '/v1/exec', '/v1/tasks']) {
      const plain = await send(path, { 'content-type': 'text/plain' }, '{"command":{"argv":["true"]}}');
      assert.equal(plain.status, 415, path);
      const plainBody = (await plain.json()) as { error: { code: string; details: unknown } };
      assert.equal(plainBody.error.code, 'request.unsupported_media_type');
      // POST /v1/jobs also takes its workspace as a multipart upload.
      const accepted = path === '/v1/jobs' ? ['application/json', 'multipart/form-data'] : ['application/json'];
      assert.deepEqual(plainBody.error.details, { accepted, given: 'text/plain' });
      // A Uint8Array body: fetch sends it with no Content-Type at all.
      const untyped = await send(path, {}, '{"command":{"argv":["true"]}}');
      assert.equal(untyped.status, 415, `${path} without Content-Type`);
      assert.equal(((await untyped.json()) as { error: { code: string } }).error.code, 'request.unsupported_media_type');
    }
    // Parameters and case do not matter: JSON with a charset is JSON.
    const charset = await send('/v1/exec', { 'content-type': 'Application/JSON; charset=utf-8' }, '{"lang":"python","code":"print(1)"}');
    assert.equal(charset.status, 200);
    // A route that takes no body of that type is refused with the same code.
    const cancel = await send('/v1/jobs/nope/cancel', { 'content-type': 'application/xml' }, '<cancel/>');
    assert.equal(cancel.status, 415);
    assert.equal(((await cancel.json()) as { error: { code: string } }).error.code, 'request.unsupported_media_type');
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

  it('serves an OpenAPI document generated from the schemas', async () => {
    const { status, json } = await api(server.url, 'GET', '/openapi.json');
    assert.equal(status, 200);
    assert.match(json.openapi, /^3\./);
    for (const path of ['/health', '/v1/jobs', '/v1/jobs/{job_id}', '/v1/jobs/{job_id}/cancel', '/v1/exec', '/v1/tasks']) assert.ok(json.paths[path], path);
    assert.ok(json.paths['/v1/jobs'].post.requestBody.content['application/json'].schema.properties.command);
  });

  it('pages through jobs newest first with a cursor', async () => {
    for (let i = 0; i < 3; i++) await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] } });
    const first = await api(server.url, 'GET', '/v1/jobs?limit=2');
    assert.equal(first.json.jobs.length, 2);
    assert.ok(first.json.next_cursor);
    const second = await api(server.url, 'GET', `/v1/jobs?limit=2&cursor=${first.json.next_cursor}`);
    assert.equal(second.json.jobs.length, 2);
    assert.ok(first.json.jobs[1].created_at >= second.json.jobs[0].created_at);
    assert.notEqual(first.json.jobs[1].job_id, second.json.jobs[0].job_id);
  });

  it('answers 400 validation.invalid_cursor to a cursor it did not give or whose job is gone, not an empty page', async () => {
    for (const cursor of ['not-a-cursor!', Buffer.from('job_that_never_was').toString('base64url'), '']) {
      const listed = await api(server.url, 'GET', `/v1/jobs?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(listed.status, 400, `cursor ${JSON.stringify(cursor)}: ${listed.text}`);
      assert.equal(listed.json.error.code, 'validation.invalid_cursor');
    }
  });

  it('pages on after a cursor whose job the status filter leaves out', async () => {
    const submit = async (argv: string[]) => (await api(server.url, 'POST', '/v1/jobs', { command: { argv } })).json.job_id as string;
    const older = await submit(['false']);
    const cursorJob = await submit(['true']);
    for (const jobId of [older, cursorJob]) await waitTerminal(server.url, jobId);
    const all = (await api(server.url, 'GET', '/v1/jobs?limit=1000')).json.jobs.map((job: { job_id: string }) => job.job_id) as string[];
    // The page that ends with the completed job gives its cursor; failed jobs page on after it.
    const cursor = (await api(server.url, 'GET', `/v1/jobs?limit=${all.indexOf(cursorJob) + 1}`)).json.next_cursor as string;
    const failed = await api(server.url, 'GET', `/v1/jobs?status=failed&limit=1000&cursor=${cursor}`);
    assert.equal(failed.status, 200, failed.text);
    const ids = failed.json.jobs.map((job: { job_id: string }) => job.job_id) as string[];
    assert.ok(ids.includes(older), `the failed job older than the cursor is listed: ${ids.join(', ')}`);
    for (const id of ids) assert.ok(all.indexOf(id) > all.indexOf(cursorJob), `${id} comes after the cursor`);
  });
});

describe('HTTP service queue limits and security', () => {
  it('answers 503 queue.full with Retry-After when the queue is at capacity', async () => {
    const server = await startServer(['--concurrency', '1', '--queue-capacity', '1']);
    try {
      // The first job takes the only worker (and keeps it until the server is stopped), so the
      // queue's one place is free for the next and the third finds it full.
      const busy = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['sleep', '300'] } });
      await waitForStatus(server.url, busy.json.job_id, 'running');
      assert.equal((await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] } })).status, 202);
      const full = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] } });
      assert.equal(full.status, 503);
      assert.equal(full.json.error.code, 'queue.full');
      assert.equal(full.headers.get('retry-after'), '1');
      assert.equal((await api(server.url, 'GET', '/health')).status, 200);
    } finally {
      await server.stop();
    }
  });

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
