import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';

describe('HTTP backends', () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer();
  });
  after(() => server.stop());

  it('GET /v1/backends answers the kinds, as the CLI prints them', async () => {
    const { status, json } = await api(server.url, 'GET', '/v1/backends');
    assert.equal(status, 200);
    assert.deepEqual(
      json.map((backend: { kind: string }) => backend.kind),
      ['local_process', 'gvisor', 'microvm'],
    );
    assert.equal(json[0].available, true);
    assert.equal(json[2].available, false);
  });

  it('a job asking for a kind not usable here ends backend_unavailable, and the service goes on', async () => {
    const submitted = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] }, backend: { kind: 'microvm' } });
    assert.equal(submitted.status, 202);
    const state = await api(server.url, 'GET', `/v1/jobs/${submitted.json.job_id}?wait=30`);
    assert.equal(state.json.status, 'backend_unavailable');
    assert.equal(state.json.result.error.code, 'backend.unavailable');
    const health = await api(server.url, 'GET', '/health');
    assert.equal(health.json.backend.kind, 'local_process');
  });
});
