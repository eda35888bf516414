import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { api, type ServerProcess, startServer, waitForHealth, waitTerminal } from '../../helpers/server.js';
import { makeWorkspace } from '../../helpers/workspace.js';

describe('HTTP backends', () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer();
  });
  after(() => server.stop());

  it('GET /v1/backends answers the kinds, as the CLI prints them', async () => {
    // The service listens before its backends are prepared: /health says when they are.
    await waitForHealth(server.url, (health) => health.preparing.length === 0, 'every backend prepared', 120_000);
    const { status, json } = await api(server.url, 'GET', '/v1/backends');
    assert.equal(status, 200);
    assert.deepEqual(
      json.map((backend: { kind: string }) => backend.kind),
      ['local_process', 'gvisor', 'microvm'],
    );
    assert.equal(json[0].available, true);
    assert.equal(json[2].available, true, JSON.stringify(json[2].notes));
    assert.deepEqual(
      json.map((backend: { state: string }) => backend.state),
      ['ready', 'ready', 'ready'],
    );
  });

  it('a run job on firecracker completes in its own VM, with its artifacts', async () => {
    const workspace = makeWorkspace({ 'make.py': 'import os\nopen("report.txt", "w").write(os.uname().nodename + " in a VM")\n' });
    const submitted = await api(server.url, 'POST', '/v1/jobs', {
      workspace: { source: 'local_path', path: workspace },
      command: { argv: ['python3', 'make.py'] },
      artifacts: ['*.txt'],
      backend: { kind: 'firecracker' },
    });
    assert.equal(submitted.status, 202);
    const state = await waitTerminal(server.url, submitted.json.job_id);
    assert.equal(state.status, 'completed', JSON.stringify(state.result));
    assert.deepEqual(state.result.backend, { kind: 'microvm' });
    const download = await api(server.url, 'GET', `/v1/jobs/${submitted.json.job_id}/artifacts/report.txt`);
    assert.equal(download.text, 'sandbox in a VM');
    assert.equal(download.headers.get('x-artifact-sha256'), createHash('sha256').update('sandbox in a VM').digest('hex'));
  });

  it('a kind no backend has ends backend_unavailable / backend.unavailable naming the known kinds, as a job and as a snippet', async () => {
    const submitted = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] }, backend: { kind: 'nope' } });
    assert.equal(submitted.status, 202, submitted.text);
    const state = await waitTerminal(server.url, submitted.json.job_id);
    assert.equal(state.status, 'backend_unavailable', JSON.stringify(state.result));
    assert.equal(state.result.error.code, 'backend.unavailable');
    assert.match(state.result.error.message, /unknown backend kind "nope"; known kinds: local_process, gvisor, microvm/);
    assert.deepEqual(state.result.backend, { kind: 'nope' });
    const snippet = await api(server.url, 'POST', '/v1/exec', { lang: 'python', code: 'print(1)', backend: { kind: 'nope' } });
    assert.equal(snippet.json.exit_code, 126, snippet.text);
    assert.match(snippet.json.error, /^sandbox unavailable: unknown backend kind "nope"/);
  });

  it('a job its kind cannot run ends backend_unavailable, and the service goes on', async () => {
    const submitted = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] }, policy: { network: 'allow' }, backend: { kind: 'microvm' } });
    assert.equal(submitted.status, 202);
    const state = await waitTerminal(server.url, submitted.json.job_id);
    assert.equal(state.status, 'backend_unavailable');
    assert.equal(state.result.error.code, 'backend.unavailable');
    const health = await api(server.url, 'GET', '/health');
    assert.equal(health.json.backend.kind, 'local_process');
  });
});
