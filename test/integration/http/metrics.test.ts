import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { api, startServer, type ServerProcess, waitTerminal } from '../../helpers/server.js';

/** The value of the sample `name{labels}` in Prometheus' text format, labels in any order; undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-z_:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const got = Object.fromEntries([...(match[2] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)].map((pair) => [pair[1], pair[2]]));
    if (Object.entries(labels).every(([key, value]) => got[key] === value)) return Number(match[3]);
  }
  return undefined;
}

/**
 * `GET /metrics`: Prometheus' text format from prom-client, the front door's numbers and its
 * worker process's in one answer, each labelled with its process; guarded by the token.
 */
describe('operations: GET /metrics, request ids and job-end log lines', () => {
  let server: ServerProcess;
  const scrape = async () => {
    const response = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    return response.text();
  };

  before(async () => {
    server = await startServer([]);
  });
  after(() => server.stop());

  it('counts jobs by face, status and backend, HTTP requests by route, the queue, the store and the sandboxes', async () => {
    const snippet = await api(server.url, 'POST', '/v1/exec', { trace_id: 'metrics', lang: 'python', code: 'print(1)', timeout: 10 });
    assert.equal(snippet.status, 200, snippet.text);
    const job = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] } });
    assert.equal(job.status, 202, job.text);
    assert.equal((await waitTerminal(server.url, job.json.job_id)).status, 'completed');
    const sandbox = await api(server.url, 'POST', '/v1/sandboxes', {});
    try {
      const text = await scrape();
      assert.equal(sample(text, 'agent_runner_jobs_total', { face: 'snippet', status: 'completed', backend: 'local_process', process: 'worker' }), 1);
      assert.equal(sample(text, 'agent_runner_job_duration_seconds_count', { face: 'snippet', backend: 'local_process' }), 1);
      assert.equal(sample(text, 'agent_runner_http_requests_total', { method: 'POST', route: '/v1/exec', status: '200', process: 'front_door' }), 1);
      assert.equal(sample(text, 'agent_runner_sandboxes', { backend: 'local_process', state: 'running' }), 1);
      assert.equal(sample(text, 'agent_runner_queue_jobs', { kind: 'capacity' }), 1000);
      assert.equal(sample(text, 'agent_runner_store_writable', {}), 1);
      assert.ok((sample(text, 'agent_runner_process_resident_memory_bytes', { process: 'worker' }) ?? 0) > 0, 'node process metrics of the worker');
      assert.ok((sample(text, 'agent_runner_process_resident_memory_bytes', { process: 'front_door' }) ?? 0) > 0, 'and of the front door');
    } finally {
      await api(server.url, 'DELETE', `/v1/sandboxes/${sandbox.json.id}`);
    }
  });

  it('counts a finished run job (once its worker has recorded it)', async () => {
    let text = '';
    // The job is terminal for its callers a moment before its worker counts it.
    for (let attempt = 0; attempt < 60; attempt++) {
      text = await scrape();
      if (sample(text, 'agent_runner_jobs_total', { face: 'run_job', status: 'completed' }) !== undefined) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    assert.equal(sample(text, 'agent_runner_jobs_total', { face: 'run_job', status: 'completed', backend: 'local_process' }), 1, text);
  });

  it("carries a request's id to its job's trace and the worker's line about its end, one JSON line per job", async () => {
    const submitted = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'hi'] } }, { 'x-request-id': 'req-from-proxy-42' });
    assert.equal(submitted.headers.get('x-request-id'), 'req-from-proxy-42');
    const state = await waitTerminal(server.url, submitted.json.job_id);
    assert.equal(state.result.trace.trace_id, 'req-from-proxy-42');
    let ended: Record<string, unknown> | undefined;
    for (let attempt = 0; attempt < 60 && !ended; attempt++) {
      ended = server.logs.map((line) => JSON.parse(line) as Record<string, unknown>).find((entry) => entry.msg === 'job finished' && entry.job_id === submitted.json.job_id);
      if (!ended) await new Promise((resolve) => setTimeout(resolve, 500));
    }
    assert.ok(ended, server.logs.slice(-5).join('\n'));
    assert.deepEqual(
      { trace_id: ended.trace_id, face: ended.face, backend: ended.backend, status: ended.status, exit_code: ended.exit_code },
      { trace_id: 'req-from-proxy-42', face: 'run_job', backend: 'local_process', status: 'completed', exit_code: 0 },
    );
    assert.equal(typeof ended.duration_ms, 'number');
    assert.equal(typeof (ended.usage as { wall_ms: number }).wall_ms, 'number');
    // Each request is one line, when answered, under its id.
    const answered = server.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => entry.reqId === 'req-from-proxy-42');
    assert.deepEqual(
      answered.map(({ msg, method, url, status }) => ({ msg, method, url, status })),
      [{ msg: 'request answered', method: 'POST', url: '/v1/jobs', status: 202 }],
    );
    assert.equal(typeof answered[0]!.ms, 'number');
    const forged = await api(server.url, 'GET', '/health', undefined, { 'x-request-id': 'bad id "forged" {}' });
    assert.match(forged.headers.get('x-request-id') ?? '', /^[a-z0-9]{1,8}$/, 'a header that could forge a log line is not taken');
  });

  it('needs the token, as every route but /health does', async () => {
    assert.equal((await fetch(`${server.url}/metrics`)).status, 401);
  });
});
