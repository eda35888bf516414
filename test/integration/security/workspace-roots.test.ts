import assert from 'node:assert/strict';
import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';
import { runJob } from '../../../src/runner/run-job.js';
import { runCli } from '../../helpers/cli.js';
import { TEST_STATE_DIR, testRuntime } from '../../helpers/runtime.js';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';
import { makeRoot, makeWorkspace, workspaceIn } from '../../helpers/workspace.js';

/**
 * Class 1 of the second security round: a remote caller names host paths. Over HTTP a
 * local_path workspace is snapshotted only inside a configured workspace root, links resolved;
 * no face ever snapshots /proc, /sys, /dev or the service's own directories. What the service
 * refuses at admission is checked in-process (test/unit/http/workspace-roots.test.ts); here a
 * job runs inside a root of a real service, and the local callers.
 */

const local = (path: string) => ({ source: 'local_path' as const, path });

async function submit(server: ServerProcess, body: unknown) {
  return api(server.url, 'POST', '/v1/jobs', body);
}

describe('workspace roots: the configuration', () => {
  it('AGENT_RUNNER_WORKSPACE_ROOTS is a colon-separated list (runJob.workspaceRoots, empty by default)', () => {
    assert.deepEqual(loadConfig({}).runJob.workspaceRoots, []);
    assert.deepEqual(loadConfig({ AGENT_RUNNER_WORKSPACE_ROOTS: '/srv/a:/srv/b:' }).runJob.workspaceRoots, ['/srv/a', '/srv/b']);
    assert.deepEqual(loadConfig({ AGENT_RUNNER_RUN_JOB__WORKSPACE_ROOTS: '/srv/c' }).runJob.workspaceRoots, ['/srv/c']);
    assert.deepEqual(loadConfig({ AGENT_RUNNER_WORKSPACE_ROOTS: '/srv/a' }, { runJob: { workspaceRoots: ['/flag'] } }).runJob.workspaceRoots, ['/flag']);
  });
});

describe('workspace roots over HTTP: --workspace-root', () => {
  let server: ServerProcess;
  let root: string;
  before(async () => {
    root = makeRoot();
    server = await startServer(['--concurrency', '1', '--workspace-root', root], { env: { AGENT_RUNNER_WORKSPACE_ROOTS: '' } });
  });
  after(() => server.stop());

  it('runs a workspace inside a root', async () => {
    const path = workspaceIn(root, { 'hello.txt': 'inside the root\n' });
    const accepted = await submit(server, { workspace: local(path), command: { argv: ['cat', 'hello.txt'] } });
    assert.equal(accepted.status, 202, JSON.stringify(accepted.json));
    const done = await api(server.url, 'GET', `/v1/jobs/${accepted.json.job_id}?wait=60`);
    assert.equal(done.json.status, 'completed', JSON.stringify(done.json.result?.error));
    assert.equal(done.json.result.stdout.text, 'inside the root\n');
  });
});

describe('workspace paths for local callers (library and CLI)', () => {
  const runtime = testRuntime();
  after(() => runtime.dispose());

  it('keep any host directory: an ordinary workspace outside every root runs', async () => {
    const result = await runJob({ workspace: local(makeWorkspace({ 'a.txt': 'local\n' })), command: { argv: ['cat', 'a.txt'] } }, { runtime });
    assert.equal(result.status, 'completed', JSON.stringify(result.error));
    assert.equal(result.stdout.text, 'local\n');
  });

  it('refuse pseudo filesystems, the state dir, and what holds them, links resolved', async () => {
    const links = makeWorkspace({});
    symlinkSync(TEST_STATE_DIR, join(links, 'state'));
    symlinkSync('/proc/self', join(links, 'self'));
    for (const path of ['/proc', '/proc/self', '/sys/kernel', '/dev', '/', TEST_STATE_DIR, join(TEST_STATE_DIR, 'runs'), join(links, 'state'), join(links, 'self')]) {
      const result = await runJob({ workspace: local(path), command: { argv: ['ls'] } }, { runtime });
      assert.equal(result.status, 'failed', path);
      assert.equal(result.error?.code, 'validation.path_escape', `${path}: ${JSON.stringify(result.error)}`);
      assert.equal(result.error?.details?.field, 'workspace.path');
    }
  });

  it('refuse artifact globs that leave the work dir', async () => {
    const result = await runJob({ command: { argv: ['true'] }, artifacts: ['../../etc/*'] }, { runtime });
    assert.equal(result.status, 'failed');
    assert.equal(result.error?.code, 'validation.path_escape');
    assert.equal(result.error?.details?.field, 'artifacts');
  });

  it('agent-runner run refuses /proc with validation.path_escape', async () => {
    const { code, stdout } = await runCli('agent-runner', ['run', '--workspace', '/proc/self', '--', 'ls']);
    assert.notEqual(code, 0);
    const result = JSON.parse(stdout) as { status: string; error: { code: string } };
    assert.equal(result.status, 'failed');
    assert.equal(result.error.code, 'validation.path_escape');
  });
});
