import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { fakeService, jobResult, snippetAnswer, type FakeService } from '../../helpers/fake-service.js';
import { waitUntil } from '../../helpers/wait.js';

/**
 * The HTTP service's contract in-process (moved from test/integration/http/service.test.ts,
 * which keeps the end-to-end smokes): the real front door behind inject(), a fake worker.
 */
describe('HTTP service contract', () => {
  let service: FakeService;
  before(async () => {
    service = await fakeService({ execConcurrency: 2 });
  });
  after(() => service.close());

  it('answers /health with queue depth and running count', async () => {
    const { status, json } = await service.api('GET', '/health');
    assert.equal(status, 200);
    assert.equal(json.status, 'ok');
    assert.deepEqual(Object.keys(json.queue).sort(), ['accepting', 'capacity', 'concurrency', 'depth', 'running']);
    assert.deepEqual(json.exec, { running: 0, waiting: 0, concurrency: 2 });
  });

  it('counts snippets and tasks in flight on /health: running in the shared slots, and waiting for one', async () => {
    // Three snippets for two slots: two run while the third waits, until the test lets them end.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    service.worker.answerSnippet = async () => {
      await released;
      return snippetAnswer({});
    };
    const snippet = { lang: 'python', code: 'import time\ntime.sleep(3)', timeout: 60 };
    const answers = [1, 2, 3].map(() => service.api('POST', '/v1/exec', snippet));
    await waitUntil(async () => {
      const { exec } = (await service.api('GET', '/health')).json;
      return exec.running === 2 && exec.waiting === 1 && exec.concurrency === 2;
    }, '/health counts 2 snippets running and 1 waiting');
    release();
    for (const answer of await Promise.all(answers)) assert.equal(answer.json.exit_code, 0, answer.text);
    assert.deepEqual((await service.api('GET', '/health')).json.exec, { running: 0, waiting: 0, concurrency: 2 });
  });

  it('answers a duplicate job_id with 409 and the existing status', async () => {
    const jobId = `dup-${randomUUID()}`;
    assert.equal((await service.api('POST', '/v1/jobs', { job_id: jobId, command: { argv: ['true'] } })).status, 202);
    const again = await service.api('POST', '/v1/jobs', { job_id: jobId, command: { argv: ['true'] } });
    assert.equal(again.status, 409);
    assert.equal(again.json.error.code, 'job.duplicate');
    assert.equal(again.json.job_id, jobId);
    assert.ok(['queued', 'running', 'completed'].includes(again.json.status));
  });

  it('answers 422 naming the field, 404 for unknown jobs', async () => {
    const invalid = await service.api('POST', '/v1/jobs', { command: { argv: ['true'], cwd: 7 } });
    assert.equal(invalid.status, 422);
    assert.equal(invalid.json.error.code, 'validation.invalid_request');
    assert.match(invalid.json.error.message, /command\.cwd must be a string/);
    assert.equal(invalid.json.error.details.field, 'command.cwd');
    const escape = await service.api('POST', '/v1/jobs', { command: { argv: ['true'], cwd: '../..' } });
    assert.equal(escape.status, 422);
    assert.equal(escape.json.error.code, 'validation.path_escape');
    const notJson = await service.api('POST', '/v1/jobs', '{nope');
    assert.equal(notJson.status, 422);
    const missing = await service.api('GET', '/v1/jobs/job_does_not_exist');
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.code, 'job.not_found');
  });

  it('answers 415 request.unsupported_media_type to a body that is not JSON on the JSON routes, before reading it', async () => {
    const send = (path: string, headers: Record<string, string | null>, body: string) => service.api('POST', path, body, { 'content-type': null, ...headers });
    for (const path of ['/v1/jobs', '/v1/exec', '/v1/tasks']) {
      const plain = await send(path, { 'content-type': 'text/plain' }, '{"command":{"argv":["true"]}}');
      assert.equal(plain.status, 415, path);
      assert.equal(plain.json.error.code, 'request.unsupported_media_type');
      // POST /v1/jobs also takes its workspace as a multipart upload.
      const accepted = path === '/v1/jobs' ? ['application/json', 'multipart/form-data'] : ['application/json'];
      assert.deepEqual(plain.json.error.details, { accepted, given: 'text/plain' });
      const untyped = await send(path, {}, '{"command":{"argv":["true"]}}');
      assert.equal(untyped.status, 415, `${path} without Content-Type`);
      assert.equal(untyped.json.error.code, 'request.unsupported_media_type');
    }
    // Parameters and case do not matter: JSON with a charset is JSON.
    const charset = await send('/v1/exec', { 'content-type': 'Application/JSON; charset=utf-8' }, '{"lang":"python","code":"print(1)"}');
    assert.equal(charset.status, 200);
    // A route that takes no body of that type is refused with the same code.
    const cancel = await send('/v1/jobs/nope/cancel', { 'content-type': 'application/xml' }, '<cancel/>');
    assert.equal(cancel.status, 415);
    assert.equal(cancel.json.error.code, 'request.unsupported_media_type');
  });

  it('serves an OpenAPI document generated from the schemas', async () => {
    const { status, json } = await service.api('GET', '/openapi.json');
    assert.equal(status, 200);
    assert.match(json.openapi, /^3\./);
    for (const path of ['/health', '/v1/jobs', '/v1/jobs/{job_id}', '/v1/jobs/{job_id}/cancel', '/v1/exec', '/v1/tasks']) assert.ok(json.paths[path], path);
    // A body is its contract type, by name, as a generated client names it.
    assert.deepEqual(json.paths['/v1/jobs'].post.requestBody.content['application/json'].schema, { $ref: '#/components/schemas/RunJobRequest' });
    assert.ok(json.components.schemas.RunJobRequest.properties.command);
  });

  it('pages through jobs newest first with a cursor', async () => {
    for (let i = 0; i < 3; i++) await service.api('POST', '/v1/jobs', { command: { argv: ['true'] } });
    const first = await service.api('GET', '/v1/jobs?limit=2');
    assert.equal(first.json.jobs.length, 2);
    assert.ok(first.json.next_cursor);
    const second = await service.api('GET', `/v1/jobs?limit=2&cursor=${first.json.next_cursor}`);
    assert.equal(second.json.jobs.length, 2);
    assert.ok(first.json.jobs[1].created_at >= second.json.jobs[0].created_at);
    assert.notEqual(first.json.jobs[1].job_id, second.json.jobs[0].job_id);
  });

  it('answers 400 validation.invalid_cursor to a cursor it did not give or whose job is gone, not an empty page', async () => {
    for (const cursor of ['not-a-cursor!', Buffer.from('job_that_never_was').toString('base64url'), '']) {
      const listed = await service.api('GET', `/v1/jobs?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(listed.status, 400, `cursor ${JSON.stringify(cursor)}: ${listed.text}`);
      assert.equal(listed.json.error.code, 'validation.invalid_cursor');
    }
  });

  it('pages on after a cursor whose job the status filter leaves out', async () => {
    // A service of its own: its worker finishes jobs in the order they were queued.
    const own = await fakeService();
    try {
      const submit = async (argv: string[]) => (await own.api('POST', '/v1/jobs', { command: { argv } })).json.job_id as string;
      const older = await submit(['false']);
      const cursorJob = await submit(['true']);
      await own.finishJob(older, jobResult('failed', { exit_code: 1, error: { code: 'run.exit_nonzero', message: 'exit 1' } }));
      await own.finishJob(cursorJob, jobResult('completed', { exit_code: 0 }));
      const all = (await own.api('GET', '/v1/jobs?limit=1000')).json.jobs.map((job: { job_id: string }) => job.job_id) as string[];
      // The page that ends with the completed job gives its cursor; failed jobs page on after it.
      const cursor = (await own.api('GET', `/v1/jobs?limit=${all.indexOf(cursorJob) + 1}`)).json.next_cursor as string;
      const failed = await own.api('GET', `/v1/jobs?status=failed&limit=1000&cursor=${cursor}`);
      assert.equal(failed.status, 200, failed.text);
      const ids = failed.json.jobs.map((job: { job_id: string }) => job.job_id) as string[];
      assert.ok(ids.includes(older), `the failed job older than the cursor is listed: ${ids.join(', ')}`);
      for (const id of ids) assert.ok(all.indexOf(id) > all.indexOf(cursorJob), `${id} comes after the cursor`);
    } finally {
      await own.close();
    }
  });
});

describe('HTTP service queue limits', () => {
  it('answers 503 queue.full with Retry-After when the queue is at capacity', async () => {
    const service = await fakeService({ queueCapacity: 1 });
    try {
      // No worker leases: the first job keeps the queue's one place, and the next finds it full.
      assert.equal((await service.api('POST', '/v1/jobs', { command: { argv: ['true'] } })).status, 202);
      const full = await service.api('POST', '/v1/jobs', { command: { argv: ['true'] } });
      assert.equal(full.status, 503);
      assert.equal(full.json.error.code, 'queue.full');
      assert.equal(full.headers['retry-after'], '1');
      assert.equal((await service.api('GET', '/health')).status, 200);
    } finally {
      await service.close();
    }
  });
});
