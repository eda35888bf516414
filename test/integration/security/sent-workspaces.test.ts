import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runJob } from '../../../src/runner/run-job.js';
import { makeTar, makeTarGz, type ArchiveEntry } from '../../helpers/archives.js';
import { testRuntime } from '../../helpers/runtime.js';
import { api, apiHeadersOnly, startServer, waitTerminal, type ServerProcess } from '../../helpers/server.js';

/**
 * A workspace sent in the request is as untrusted as the code it carries. Every refusal is a
 * 422 from the front door, at submit time, with its stable code; none is left to the worker.
 * The caps are the run-job workspace limits of the configuration, set small here. The refusals
 * at submit time are checked in-process (test/unit/http/sent-workspaces.test.ts); here what
 * needs the real service: a run within the caps, a length refused before its body is sent.
 */

const CAPS = { files: 8, bytes: 4096, fileBytes: 2048 };

const archive = async (entries: ArchiveEntry[], format: 'tar' | 'tar.gz' = 'tar') => ({
  source: 'archive',
  format,
  data: (format === 'tar' ? await makeTar(entries) : await makeTarGz(entries)).toString('base64'),
});

describe('sent workspaces over HTTP, end to end', () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(['--concurrency', '1', '--body-limit-mb', '1'], {
      env: {
        AGENT_RUNNER_RUN_JOB__MAX_WORKSPACE_FILES: String(CAPS.files),
        AGENT_RUNNER_RUN_JOB__MAX_WORKSPACE_BYTES: String(CAPS.bytes),
        AGENT_RUNNER_RUN_JOB__MAX_FILE_BYTES: String(CAPS.fileBytes),
      },
    });
  });
  after(() => server.stop());

  it("refuses a multipart length announced beyond two parts' worth from the headers alone", async () => {
    const announced = await apiHeadersOnly(server.url, 'POST', '/v1/jobs', { 'content-type': 'multipart/form-data; boundary=x', 'content-length': String(64 * 1024 * 1024) });
    assert.equal(announced.status, 413);
    assert.equal(announced.json.error.code, 'request.too_large');
  });

  it('still runs a workspace within the caps', async () => {
    const submitted = await api(server.url, 'POST', '/v1/jobs', {
      workspace: await archive([{ name: 'hello.py', content: 'print("within the caps")\n' }], 'tar.gz'),
      command: { argv: ['python3', 'hello.py'] },
    });
    assert.equal(submitted.status, 202, JSON.stringify(submitted.json));
    const state = await waitTerminal(server.url, submitted.json.job_id);
    assert.equal(state.status, 'completed', JSON.stringify(state.result.error));
    assert.equal(state.result.stdout.text, 'within the caps\n');
  });
});

describe('sent workspaces: the worker judges them again', () => {
  const runtime = testRuntime();
  after(() => runtime.dispose());

  it('a library caller (no front door) gets status failed with the same code, before any sandbox is taken', async () => {
    const workspace = await archive([
      { name: 'a', content: 'a' },
      { name: 'b', type: 'link', linkname: 'a' },
    ]);
    const result = await runJob({ workspace, command: { argv: ['true'] } }, { runtime });
    assert.equal(result.status, 'failed');
    assert.equal(result.error?.code, 'validation.path_escape');
    assert.match(result.error?.message ?? '', /is a hard link/);
  });
});
