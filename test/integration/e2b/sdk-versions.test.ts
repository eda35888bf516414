import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startServer, type ServerProcess } from '../../helpers/server.js';

/**
 * The `e2b` and `@e2b/code-interpreter` SDK versions users run, side by side (package.json's npm
 * aliases): the oldest 2.x still in use (e2b 2.39.0 sends `autoResume` on every create), one
 * between, and the newest (the project's own, which the other E2B tests drive). Each makes,
 * drives and kills a sandbox against the same server, unchanged.
 */
const VERSIONS = ['e2b-2.39', 'e2b-2.45', 'e2b'] as const;
/**
 * `@e2b/code-interpreter` from 2.7.0, the first that sends its cells to `E2B_SANDBOX_URL`
 * (before, only to `https://49999-{id}.{domain}`, a host name with TLS that this server does not
 * give yet), one between, and the newest (the project's).
 */
const INTERPRETER_VERSIONS = ['@e2b/code-interpreter-2.7.0', '@e2b/code-interpreter-2.7.2', '@e2b/code-interpreter'] as const;

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

  for (const name of INTERPRETER_VERSIONS) {
    it(`${name}: its default template, cells in the default and a new context, javascript`, async () => {
      const { Sandbox } = (await import(name)) as typeof import('@e2b/code-interpreter');
      const sandbox = await Sandbox.create({ apiKey: token, apiUrl: server.url, sandboxUrl: server.url });
      try {
        assert.equal((await sandbox.runCode('x = 1; x')).text, '1');
        const context = await sandbox.createCodeContext({ language: 'python' });
        await sandbox.runCode('y = 2', { context });
        assert.equal((await sandbox.runCode('y', { context })).text, '2');
        assert.equal((await sandbox.runCode('1 + 1', { language: 'javascript' })).text, '2');
      } finally {
        await sandbox.kill();
      }
    });
  }
});
