import assert from 'node:assert/strict';
import { chmodSync, existsSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { agentExec, disposeRoot, ok, removeDir, tempDir, UNTIL_IT_ENDS } from '../../helpers/agent-exec.js';

describe('the workspace sandbox, for real', () => {
  const root = tempDir('agent-exec-sbx-');
  const cwd = tempDir('agent-exec-sbx-cwd-');
  const outside = tempDir('agent-exec-sbx-outside-');
  after(async () => {
    await disposeRoot(root);
    [cwd, outside].forEach(removeDir);
  });

  it('writes its cwd and nothing else of the host', async () => {
    const script = [
      `touch ${cwd}/made-inside && echo cwd-ok`,
      `touch ${outside}/escaped 2>/dev/null && echo escaped-tmp`,
      'touch /var/tmp/agent-exec-escape 2>/dev/null && echo escaped-var',
      'touch /usr/local/agent-exec-escape 2>/dev/null || echo usr-read-only',
    ].join('; ');
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--', 'sh', '-c', script]);
    assert.equal(response.stdout, 'cwd-ok\nusr-read-only\n');
    assert.ok(existsSync(join(cwd, 'made-inside')));
    assert.ok(!existsSync(join(outside, 'escaped')));
    assert.ok(!existsSync('/var/tmp/agent-exec-escape'));
  });

  it("cannot read /root, secret files, or agent-exec's own root", async () => {
    assert.ok(readdirSync('/root').length > 0, 'the host /root has entries to hide');
    const script = `ls -A /root | wc -l; cat /etc/shadow 2>/dev/null | wc -c; ls -A ${root} 2>/dev/null | wc -l`;
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--', 'sh', '-c', script]);
    assert.deepEqual(
      response.stdout.split('\n').map((line) => line.trim()),
      ['0', '0', '0', ''],
    );
  });

  it('a command the sandbox would hide is command_not_found; --sandbox none runs it', async () => {
    const tool = join(outside, 'tool.sh');
    writeFileSync(tool, '#!/bin/sh\necho tool ran\n');
    chmodSync(tool, 0o755);
    const hidden = await agentExec(root, ['run', '--cwd', cwd, '--', tool]);
    assert.equal(hidden.code, 1);
    assert.equal(hidden.response.error.code, 'command_not_found');
    assert.equal((await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--sandbox', 'none', '--', tool])).stdout, 'tool ran\n');
  });

  it('fails closed when bwrap is missing: sandbox_unavailable, and no job at all', async () => {
    const empty = tempDir('agent-exec-nobwrap-');
    try {
      const { code, response } = await agentExec(empty, ['run', '--cwd', cwd, '--', 'true'], { env: { AGENT_EXEC_BWRAP: '/nonexistent/bwrap' } });
      assert.equal(code, 1);
      assert.equal(response.error.code, 'sandbox_unavailable');
      assert.deepEqual((await ok(empty, ['list'])).jobs, []);
    } finally {
      removeDir(empty);
    }
  });

  it('a sandbox that cannot be set up leaves the job failed, never run without it', async () => {
    const bin = tempDir('agent-exec-fakebwrap-');
    const fake = join(bin, 'bwrap');
    // Like bwrap on a host without user namespaces: an error, and no child-pid on the status fd.
    writeFileSync(fake, '#!/bin/sh\necho "bwrap: No permissions to create new namespace" >&2\nexit 1\n');
    chmodSync(fake, 0o755);
    try {
      const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--', 'sh', '-c', `touch ${cwd}/ran-unsandboxed`], { env: { AGENT_EXEC_BWRAP: fake } });
      assert.equal(response.state, 'failed');
      assert.match(response.error as unknown as string, /sandbox could not be set up: bwrap: No permissions/);
      assert.ok(!existsSync(join(cwd, 'ran-unsandboxed')));
    } finally {
      removeDir(bin);
    }
  });

  it('/ as cwd would make the whole host writable: refused', async () => {
    const { code, response } = await agentExec(root, ['run', '--cwd', '/', '--', 'true']);
    assert.equal(code, 2);
    assert.equal(response.error.code, 'invalid_argument');
  });
});

describe('--network', () => {
  const root = tempDir('agent-exec-net-');
  const cwd = tempDir('agent-exec-net-cwd-');
  const server = createServer((socket) => socket.end('hello from the host\n'));
  let port = 0;
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.close();
    await disposeRoot(root);
    removeDir(cwd);
  });

  /** Connects to the host's listener from inside the job and prints what happened. */
  const probe = () => [process.execPath, '-e', `require('net').connect(${port}, '127.0.0.1').on('data', (d) => process.stdout.write(d)).on('error', (e) => console.log(e.code))`];

  it('none: only a loopback of its own, the host unreachable', async () => {
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--network', 'none', '--', ...probe()]);
    assert.equal(response.stdout, 'ECONNREFUSED\n');
    const interfaces = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--network', 'none', '--', 'cat', '/proc/net/dev']);
    const names = interfaces.stdout
      .split('\n')
      .slice(2)
      .filter(Boolean)
      .map((line) => line.split(':')[0]!.trim());
    assert.deepEqual(names, ['lo']);
  });

  it('host (the default): the same connection works', async () => {
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--', ...probe()]);
    assert.equal(response.stdout, 'hello from the host\n');
  });
});
