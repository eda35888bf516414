import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startServer, type ServerProcess } from '../../helpers/server.js';

/**
 * The `e2b` SDK versions users run, side by side (package.json's npm aliases): the oldest 2.x
 * still in use (2.39.0, which sends `autoResume` on every create), one between, and the newest
 * (the project's own `e2b`, which the other E2B tests drive). Each makes, drives, pauses, resumes
 * and kills a sandbox against the same server, unchanged.
 */
const VERSIONS = ['e2b-2.39', 'e2b-2.45', 'e2b'] as const;

describe('e2b SDK versions against agent-runner', () => {
  let server: ServerProcess;
  // SDKs before 2.46 take only a key shaped as E2B's: `e2b_` and 40 hex digits.
  const token = `e2b_${randomBytes(20).toString('hex')}`;
  before(async () => {
    server = await startServer(['--token', token]);
  });
  after(() => server.stop());

  for (const name of VERSIONS) {
    it(`${name}: create, commands, files, list, timeout, pause, connect, kill`, async () => {
      const { Sandbox } = (await import(name)) as typeof import('e2b');
      const opts = { apiKey: token, apiUrl: server.url, sandboxUrl: server.url };
      const tag = randomBytes(4).toString('hex');
      const sandbox = await Sandbox.create('base', { ...opts, metadata: { tag }, timeoutMs: 120_000 });
      try {
        assert.equal((await sandbox.commands.run('echo hi')).stdout, 'hi\n');
        await sandbox.files.write('kept.txt', 'kept');
        assert.equal(await sandbox.files.read('kept.txt'), 'kept');
        const listed = await Sandbox.list({ ...opts, query: { metadata: { tag } } }).nextItems();
        assert.deepEqual(
          listed.map((item) => item.sandboxId),
          [sandbox.sandboxId],
        );
        await sandbox.setTimeout(300_000);
        // Files only: older SDKs ask for memory by default, which local_process does not keep.
        await sandbox.pause({ keepMemory: false });
        assert.equal((await Sandbox.getInfo(sandbox.sandboxId, opts)).state, 'paused');
        const resumed = await Sandbox.connect(sandbox.sandboxId, opts);
        assert.equal(await resumed.files.read('kept.txt'), 'kept');
      } finally {
        assert.equal(await Sandbox.kill(sandbox.sandboxId, opts), true);
      }
    });
  }
});
