import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { BubblewrapBackend } from '../../../src/isolation/bubblewrap/bubblewrap-backend.js';
import { TEST_STATE_DIR, testRuntime } from '../../helpers/runtime.js';
import { hostProcessesMatching } from '../../helpers/processes.js';

const runtime = testRuntime();
const run = (lang: string, code: string, timeout = 10) => executeSnippet({ lang, code, timeout }, { runtime });

describe('sandbox isolation', () => {
  const secret = `agent-runner-secret-${randomUUID()}`;
  before(() => {
    process.env.AGENT_RUNNER_TEST_SECRET = secret;
  });
  after(() => {
    delete process.env.AGENT_RUNNER_TEST_SECRET;
  });

  it('starts from an empty environment: only PATH, HOME, LANG, the PWD bwrap sets, and what the language sets', async () => {
    const response = await run('python', 'import os\nprint(sorted(os.environ))');
    assert.equal(response.stdout, "['HOME', 'LANG', 'PATH', 'PWD', 'PYTHONDONTWRITEBYTECODE']\n");
    const all = await run('bash', 'cat /proc/self/environ /proc/1/environ | tr "\\0" "\\n"');
    assert.ok(!all.stdout.includes(secret));
  });

  it('runs as an unprivileged user with no capabilities and no_new_privs', async () => {
    const response = await run('bash', 'id -u; id -g; grep -E "^(CapEff|CapBnd|NoNewPrivs)" /proc/self/status');
    assert.equal(response.stdout, '1000\n1000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n');
  });

  it('has its own host name, PID namespace and no network but loopback', async () => {
    const response = await run('bash', 'hostname; echo $$; ls /sys/class/net 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " "');
    const [hostname, pid, ...interfaces] = response.stdout.trim().split('\n');
    assert.equal(hostname, 'sandbox');
    assert.ok(Number(pid) < 10, `pid ${pid} should be small in a fresh PID namespace`);
    assert.deepEqual(interfaces, ['lo']);
  });

  it('cannot reach a listener on the host loopback', async () => {
    const server = createServer((socket) => socket.end('reached'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const response = await run(
        'python',
        `import socket\ntry:\n    socket.create_connection(("127.0.0.1", ${port}), timeout=2)\n    print("connected")\nexcept OSError as e:\n    print("refused")`,
      );
      assert.equal(response.stdout, 'refused\n');
    } finally {
      server.close();
    }
  });

  it('sees no host home, secrets or /sys, and cannot write outside its scratch space', async () => {
    const response = await run(
      'bash',
      'for p in /root /home /etc/shadow /sys /var; do [ -e $p ] && echo "present $p"; done; touch /usr/x 2>/dev/null && echo "wrote /usr"; touch /etc/x 2>/dev/null && echo "wrote /etc"; touch /x 2>/dev/null && echo "wrote /"; touch /tmp/ok && echo "tmp ok"',
    );
    assert.equal(response.stdout, 'tmp ok\n');
  });

  it('kills the whole tree on timeout, daemonised children included', async () => {
    const marker = `sleep-marker-${randomUUID().slice(0, 8)}`;
    const response = await run(
      'bash',
      `setsid bash -c 'exec -a ${marker} sleep 300' &\nnohup bash -c 'exec -a ${marker} sleep 300' >/dev/null 2>&1 &\n( ( exec -a ${marker} sleep 300 ) & )\necho started\nsleep 300`,
      // Room for the forks and the echo before the timeout: a loaded CI machine needs it.
      5,
    );
    assert.equal(response.exit_code, 124);
    assert.equal(response.stdout, 'started\n');
    assert.ok(response.stderr.endsWith('\nExecution timed out'));
    assert.deepEqual(hostProcessesMatching(marker), []);
  });

  it('contains a fork bomb within the process limit and stays usable', async () => {
    const response = await run('bash', ':(){ :|:& };:\nsleep 2\necho survived', 5);
    assert.ok([0, 124].includes(response.exit_code) || response.exit_code > 0);
    const next = await run('python', 'print("next job fine")');
    assert.equal(next.stdout, 'next job fine\n');
  });

  it('gives each job a fresh /tmp: nothing survives into the next job', async () => {
    await run('bash', 'echo leftover > /tmp/carry; echo leftover > /dev/shm/carry');
    const response = await run('bash', 'cat /tmp/carry /dev/shm/carry 2>&1 | grep -c leftover');
    assert.equal(response.stdout, '0\n');
  });

  it('fails closed when bubblewrap is missing: an error, never an unsandboxed run', async () => {
    const missing = testRuntime({}, { backend: new BubblewrapBackend({ runtimeDir: join(TEST_STATE_DIR, 'runtime'), bwrapPath: '/nonexistent/bwrap' }) });
    const response = await executeSnippet({ lang: 'bash', code: 'echo ran' }, { runtime: missing });
    assert.equal(response.stdout, '');
    assert.match(response.error, /^sandbox unavailable: bubblewrap is not installed at \/nonexistent\/bwrap/);
    assert.notEqual(response.exit_code, 0);
  });
});
