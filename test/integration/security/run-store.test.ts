import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { contractError } from '../../../src/contract/errors.js';
import { unrunResult } from '../../../src/runner/run-job.js';
import { DiskRunStore } from '../../../src/store/disk-store.js';
import { testRuntime } from '../../helpers/runtime.js';
import { api, startServer, waitForStatus, waitTerminal } from '../../helpers/server.js';
import { makeWorkspace } from '../../helpers/workspace.js';

/**
 * Class 6 of the second security round: the run store held env values in a world-readable
 * request.json. It is private to the service's user now (0700 dirs, 0600 files) and keeps
 * env keys with the sha256 of each value; the job still gets the real values, in memory.
 */

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const mode = (path: string) => statSync(path).mode & 0o777;

/** Every file below `dir`, with its path. */
function filesBelow(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? filesBelow(path) : [path];
  });
}

describe('the run store keeps no secrets and is private', () => {
  const runtime = testRuntime();
  after(() => runtime.dispose());

  it('stores env keys with the sha256 of each value; the job gets the real value; modes 0700/0600', async () => {
    const secret = `s3cr3t-${randomBytes(12).toString('hex')}`;
    const server = await startServer(['--concurrency', '1']);
    try {
      const request = {
        workspace: { source: 'local_path' as const, path: makeWorkspace({ 'show.py': 'import hashlib, os\nprint(hashlib.sha256(os.environ["API_KEY"].encode()).hexdigest())\n' }) },
        command: { argv: ['python3', 'show.py'], env: { API_KEY: secret, MODE: 'release' } },
        policy: { allowed_env: ['API_KEY', 'MODE'] },
      };
      const accepted = await api(server.url, 'POST', '/v1/jobs', request);
      assert.equal(accepted.status, 202, JSON.stringify(accepted.json));
      const jobId = accepted.json.job_id as string;
      const done = await api(server.url, 'GET', `/v1/jobs/${jobId}?wait=60`);
      assert.equal(done.json.status, 'completed', JSON.stringify(done.json.result?.error));
      assert.equal(done.json.result.stdout.text, `${sha256(secret)}\n`, 'the job saw the real value');

      const runsDir = join(server.storeDir, 'runs');
      const runDir = join(runsDir, jobId);
      const stored = JSON.parse(readFileSync(join(runDir, 'request.json'), 'utf8'));
      assert.deepEqual(stored.command.env, { API_KEY: { sha256: sha256(secret) }, MODE: { sha256: sha256('release') } });
      assert.deepEqual(stored.command.argv, request.command.argv);
      for (const file of filesBelow(server.storeDir)) assert.ok(!readFileSync(file).includes(secret), `${file} holds the secret`);

      assert.equal(mode(runsDir), 0o700);
      assert.equal(mode(runDir), 0o700);
      for (const name of ['request.json', 'status.json', 'result.json', 'stdout.log', 'stderr.log']) assert.equal(mode(join(runDir, name)), 0o600, name);

      // The replay hash covers the whole request, values included (computed before redaction).
      const expected = unrunResult({ ...request, job_id: jobId }, 'failed', contractError('run.canceled', 'hash only'), runtime).replay.request_sha256;
      assert.equal(done.json.result.replay.request_sha256, expected);
    } finally {
      await server.stop();
    }
  });

  it('after a restart, a queued job whose env was redacted ends failed with store.redacted; others run', async () => {
    const first = await startServer(['--concurrency', '1']);
    let second: Awaited<ReturnType<typeof startServer>> | undefined;
    try {
      const busy = await api(first.url, 'POST', '/v1/jobs', { command: { argv: ['sleep', '120'] } });
      await waitForStatus(first.url, busy.json.job_id, 'running');
      const withEnv = await api(first.url, 'POST', '/v1/jobs', { command: { argv: ['printenv', 'TOKEN'], env: { TOKEN: 'not-kept' } }, policy: { allowed_env: ['TOKEN'] } });
      const withoutEnv = await api(first.url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'no secrets here'] } });
      assert.equal((await api(first.url, 'GET', `/v1/jobs/${withEnv.json.job_id}`)).json.status, 'queued');
      first.child.kill('SIGKILL');
      await first.exited;

      second = await startServer(['--concurrency', '1'], { storeDir: first.storeDir });
      const redacted = await waitTerminal(second.url, withEnv.json.job_id);
      assert.equal(redacted.status, 'failed');
      assert.equal(redacted.result.error.code, 'store.redacted');
      assert.match(redacted.result.error.message, /never ran/);
      assert.deepEqual(redacted.result.command.argv, ['printenv', 'TOKEN']);
      assert.equal(redacted.result.stdout.observed_bytes, 0);
      assert.equal(redacted.result.replay.request_sha256, '', 'no replay hash over values that are not kept');
      const ran = await api(second.url, 'GET', `/v1/jobs/${withoutEnv.json.job_id}?wait=60`);
      assert.equal(ran.json.status, 'completed');
      assert.equal(ran.json.result.stdout.text, 'no secrets here\n');
      assert.equal((await api(second.url, 'GET', `/v1/jobs/${busy.json.job_id}`)).json.result.error.code, 'run.interrupted');
    } finally {
      await first.stop();
      await second?.stop();
    }
  });

  it('open() closes a store an earlier version left world-readable', async () => {
    const root = mkdtempSync(join(tmpdir(), 'store-old-'));
    mkdirSync(join(root, 'runs'), { mode: 0o755 });
    chmodSync(join(root, 'runs'), 0o755);
    const store = new DiskRunStore(root);
    await store.open();
    assert.equal(mode(join(root, 'runs')), 0o700);
    await store.create('job-modes', { command: { argv: ['true'] } }, undefined);
    assert.equal(mode(store.runDir('job-modes')), 0o700);
    for (const name of ['request.json', 'status.json']) assert.equal(mode(join(store.runDir('job-modes'), name)), 0o600);
  });
});
