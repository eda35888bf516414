import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentRunnerClient } from '../../../src/client/client.js';
import { AgentRunnerError } from '../../../src/client/types.js';
import type { Session } from '../../../src/contract/session.js';
import { runCli } from '../../helpers/cli.js';
import { testRuntime } from '../../helpers/runtime.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from '../../helpers/timeouts.js';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';
import { availableKinds } from '../../helpers/backends.js';

async function refusal(call: Promise<unknown>): Promise<AgentRunnerError> {
  try {
    await call;
  } catch (error) {
    if (error instanceof AgentRunnerError) return error;
    throw error;
  }
  assert.fail('the service accepted it');
}

describe('sessions over HTTP', async () => {
  let server: ServerProcess;
  let client: AgentRunnerClient;
  const kinds = await availableKinds(testRuntime(), 'run-job');

  before(async () => {
    server = await startServer([], { env: { AGENT_RUNNER_SESSIONS__MAX: '3' } });
    client = new AgentRunnerClient({ url: server.url, token: server.token! });
  });

  after(async () => {
    await server.stop();
  });

  // The service holds 3 sessions: one a failed test left open would fail the next ones with
  // sessions.full. Each test's sessions end after it, pass or fail.
  const opened = new Set<string>();
  const openSession = async (request: Parameters<AgentRunnerClient['createSession']>[0]) => {
    const session = await client.createSession(request);
    opened.add(session.id);
    return session;
  };
  afterEach(async () => {
    await Promise.all([...opened].map((id) => client.endSession(id).catch(() => undefined)));
    opened.clear();
  });

  it('a python session keeps its names, files and imports between cells', async () => {
    const session = await openSession({ lang: 'python' });
    assert.match(session.id, /^ses_[0-9a-f]{32}$/);
    assert.equal(session.state, 'running');
    assert.match(String(session.version), /^3\./);
    assert.equal(session.work_dir, '/workspace');

    const first = await client.sessionExec(session.id, { code: 'x = 41\nimport json' });
    assert.deepEqual([first.exit_code, first.stdout, first.value, first.error], [0, '', null, null]);
    const second = await client.sessionExec(session.id, { code: 'print(x + 1)\njson.dumps({"x": x})' });
    assert.equal(second.stdout, '42\n');
    assert.equal(second.value, `'{"x": 41}'`);

    const written = await client.putSessionFile(session.id, 'data/in.txt', 'sent by PUT\n');
    assert.equal(written.bytes, 12);
    assert.match(written.sha256, /^[0-9a-f]{64}$/);
    const read = await client.sessionExec(session.id, { code: 'print(open("data/in.txt").read().upper(), end="")\nopen("out.txt", "w").write("from a cell")' });
    assert.equal(read.stdout, 'SENT BY PUT\n');
    assert.equal((await client.getSessionFile(session.id, 'out.txt')).toString(), 'from a cell');

    const listing = await client.sessionExec(session.id, { argv: ['ls', 'data'] });
    assert.deepEqual([listing.exit_code, listing.stdout], [0, 'in.txt\n']);

    const raised = await client.sessionExec(session.id, { code: 'print("before")\n1 / 0' });
    assert.equal(raised.exit_code, 1);
    assert.equal(raised.error, 'ZeroDivisionError: division by zero');
    assert.equal(raised.stdout, 'before\n');
    assert.match(raised.stderr, /Cell In \[\d+\], line 2/);

    const ended = await client.endSession(session.id);
    assert.deepEqual([ended.state, ended.ended_reason], ['ended', 'deleted']);
    const after = await refusal(client.sessionExec(session.id, { code: 'x' }));
    assert.deepEqual([after.status, after.code], [409, 'session.ended']);
    assert.equal((await client.session(session.id)).state, 'ended');
  });

  it('a cell past its timeout is interrupted and the session keeps its state; one that will not stop ends the session, saying so', async () => {
    const session = await openSession({ lang: 'python' });
    await client.sessionExec(session.id, { code: 'kept = "still here"' });
    const interrupted = await client.sessionExec(session.id, { code: 'import time\nwhile True: time.sleep(0.05)', timeout: 0.5 });
    assert.deepEqual([interrupted.exit_code, interrupted.timed_out, interrupted.session_ended], [124, true, false]);
    assert.match(String(interrupted.error), /^KeyboardInterrupt/);
    assert.equal((await client.sessionExec(session.id, { code: 'kept' })).value, `'still here'`);

    // The cell takes the interrupt away from itself: only a new kernel stops it, and its names would be gone.
    // Its timeout leaves room for signal.signal to run first (an interrupt before it is a plain
    // KeyboardInterrupt): not the subject; a loaded CI machine needs room.
    const stuck = await client.sessionExec(session.id, { code: 'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass', timeout: 3 });
    assert.deepEqual([stuck.exit_code, stuck.timed_out, stuck.session_ended], [124, true, true]);
    assert.match(String(stuck.error), /did not stop at its timeout of 3 s, so the session was ended/);
    const described = await client.session(session.id);
    assert.equal(described.state, 'ended');
    assert.equal(described.ended_reason, stuck.error);
  });

  it('a cell’s own exception named as the bridge names a kernel it replaced ends nothing', async () => {
    const session = await openSession({ lang: 'python' });
    const raised = await client.sessionExec(session.id, { code: 'class ContextRestarted(Exception): pass\nraise ContextRestarted("mine")' });
    assert.deepEqual([raised.exit_code, raised.error, raised.session_ended], [1, 'ContextRestarted: mine', false]);
    await client.endSession(session.id);
  });

  // A deadline of the test's own, far under the cell's timeout: the answer must not wait for it.
  // The deadline also covers opening the session, which a loaded CI machine takes long over.
  it('a session ended while a cell runs answers that cell at once, saying why', { timeout: 120_000 }, async () => {
    const session = await openSession({ lang: 'python' });
    const running = client.sessionExec(session.id, { code: 'import time\ntime.sleep(3600)', timeout: NOT_THE_SUBJECT_TIMEOUT_S });
    await sleep(1000);
    await client.endSession(session.id);
    const answered = await running;
    assert.deepEqual([answered.session_ended, answered.error], [true, 'deleted']);
  });

  it('a cell cannot answer for its kernel: a frame it writes to its stdout and stderr descriptors is not taken, and the session goes on', async () => {
    const session = await openSession({ lang: 'python' });
    // The cell's request is the bridge's id 1 after its start-up: the forgery names it.
    const forged = await client.sessionExec(session.id, {
      code: [
        'import json, os, struct',
        'body = json.dumps({"id": 1, "output": {"type": "result", "is_main_result": True, "text": "forged"}}).encode()',
        'for fd in (1, 2):',
        '    os.write(fd, struct.pack(">I", len(body)) + body)',
        'print("wrote")',
      ].join('\n'),
    });
    assert.deepEqual([forged.exit_code, forged.value, forged.results, forged.session_ended], [0, null, [], false]);
    assert.equal((await client.sessionExec(session.id, { code: '6 * 7' })).value, '42');
    await client.endSession(session.id);
  });

  it('a cell that prints more than the host keeps gets its output cut, saying so', async () => {
    const session = await openSession({ lang: 'python' });
    const printed = await client.sessionExec(session.id, { code: 'import sys\nfor _ in range(8): sys.stdout.write("x" * (1 << 20))' });
    // The kernel sends the eight writes as it holds them (64 KiB or a line at a time); the host keeps 1 MiB of them and counts the rest.
    assert.match(printed.stdout.slice(-100), /x\n\[stdout truncated: \d+ bytes, the first 1048576 kept\]$/);
    assert.ok(Buffer.byteLength(printed.stdout) < (1 << 20) + 100);
    await client.endSession(session.id);
  });

  for (const [lang, setup, big, raise, kept] of [
    ['python', 'kept = "still here"', '"x" * (30 << 20)', 'raise ValueError("y" * (30 << 20))', `'still here'`],
    [
      'node',
      'globalThis.kept = "still here"',
      `({ [Symbol.for('nodejs.util.inspect.custom')]: () => 'x'.repeat(30 << 20) })`,
      `throw new Error('y'.repeat(30 << 20))`,
      `'still here'`,
    ],
  ] as const) {
    it(`a ${lang} cell whose value or error is over the output cap gets it cut, saying so, and the session keeps its state`, async () => {
      const session = await openSession({ lang });
      await client.sessionExec(session.id, { code: setup });
      // Building and inspecting 30 MiB took more than a cell's default 10 s on a loaded machine.
      const value = await client.sessionExec(session.id, { code: big, timeout: NOT_THE_SUBJECT_TIMEOUT_S });
      assert.equal(value.session_ended, false, String(value.error));
      // The tail only: a pattern run over a whole MiB takes seconds.
      // Cut by the host (node's inspect), or already in the sandbox (python's result, cut to 64 KiB of text).
      assert.match(
        String(value.value).slice(-300),
        /x{100}\n\[(value truncated: 3145728\d bytes, the first 10485\d\d kept|result cut: its formats were 3145\d+ bytes, more than the \d+ a result may carry; the first \d+ characters of its text kept)\]$/,
      );
      assert.ok(Buffer.byteLength(String(value.value)) < (1 << 20) + 100);
      assert.ok(
        value.results.every((result) => result.text === undefined || Buffer.byteLength(result.text) < (1 << 20) + 100),
        'a result’s text is held to the cap too',
      );
      const raised = await client.sessionExec(session.id, { code: raise, timeout: NOT_THE_SUBJECT_TIMEOUT_S });
      assert.deepEqual([raised.exit_code, raised.session_ended], [1, false]);
      assert.match(String(raised.error).slice(-200), /y{100}\n\[error truncated: \d+ bytes, the first 10485\d\d kept\]$/);
      assert.equal((await client.sessionExec(session.id, { code: 'kept' })).value, kept);
      await client.endSession(session.id);
    });
  }

  for (const [lang, mkfifo] of [
    ['python', 'import os\nos.mkfifo("pipe")\nkept = "still here"'],
    ['node', `require('child_process').execFileSync('mkfifo', ['pipe']); globalThis.kept = 'still here'`],
  ] as const) {
    it(`a ${lang} session serves only regular files: a FIFO a cell made is refused at once, and the kernel answers the next cell`, async () => {
      const session = await openSession({ lang });
      try {
        assert.equal((await client.sessionExec(session.id, { code: mkfifo })).exit_code, 0);
        const read = await refusal(client.getSessionFile(session.id, 'pipe'));
        assert.deepEqual([read.status, read.code], [422, 'session.file_not_regular']);
        assert.match(read.message, /pipe: not a regular file/);
        const written = await refusal(client.putSessionFile(session.id, 'pipe', 'into the fifo'));
        assert.deepEqual([written.status, written.code], [422, 'session.file_not_regular']);
        const next = await client.sessionExec(session.id, { code: 'kept' });
        assert.deepEqual([next.value, next.session_ended], [`'still here'`, false]);
      } finally {
        await client.endSession(session.id);
      }
    });
  }

  it('session files stay in the work dir: a link that leads out of it is refused (validation.path_escape), one that stays in is followed', async () => {
    const session = await openSession({});
    const run = async (...argv: string[]) => assert.equal((await client.sessionExec(session.id, { argv })).exit_code, 0, argv.join(' '));
    try {
      await client.putSessionFile(session.id, 'data/v3/x.csv', 'a,b\n');
      // Planted by the session's own code: out to the sandbox's root, its /tmp, a file, up, and absolute.
      await run('ln', '-s', '/', 'rootlink');
      await run('ln', '-s', '/tmp', 'tmplink');
      await run('ln', '-s', '/etc/passwd', 'passwd');
      await run('ln', '-s', '../..', 'data/up');
      await run('ln', '-s', '/tmp/made-through-a-link', 'dangling');
      // And inside: relative, absolute under the work dir, and a chain of both.
      await run('ln', '-s', 'data/v3', 'latest');
      await run('ln', '-s', '/workspace/data', 'abs');
      await run('ln', '-s', 'abs/v3', 'chain');
      for (const path of ['rootlink/etc/passwd', 'passwd', 'data/up/etc/passwd', 'tmplink/x']) {
        const read = await refusal(client.getSessionFile(session.id, path));
        assert.deepEqual([read.status, read.code], [422, 'validation.path_escape'], `${path}: ${read.message}`);
      }
      for (const path of ['tmplink/x', 'dangling', 'rootlink/tmp/y']) {
        const written = await refusal(client.putSessionFile(session.id, path, 'out'));
        assert.deepEqual([written.status, written.code], [422, 'validation.path_escape'], `${path}: ${written.message}`);
      }
      const made = await client.sessionExec(session.id, { argv: ['ls', '/tmp'] });
      assert.equal(made.stdout, '', 'nothing was written outside the work dir');
      for (const path of ['latest/x.csv', 'abs/v3/x.csv', 'chain/x.csv']) assert.equal((await client.getSessionFile(session.id, path)).toString(), 'a,b\n', path);
      await client.putSessionFile(session.id, 'latest/new/y.csv', 'through a link inside');
      assert.equal((await client.getSessionFile(session.id, 'data/v3/new/y.csv')).toString(), 'through a link inside');
    } finally {
      await client.endSession(session.id);
    }
  });

  it('a node session keeps its globals, awaits a cell, and survives an interrupted loop', async () => {
    const session = await openSession({ lang: 'js' });
    assert.equal(session.lang, 'node');
    await client.sessionExec(session.id, { code: 'var x = 41; const seen = []' });
    const next = await client.sessionExec(session.id, { code: 'seen.push(1); console.log(x + 1); ({ x, seen })' });
    assert.equal(next.stdout, '42\n');
    assert.equal(next.value, '{ x: 41, seen: [ 1 ] }');
    const awaited = await client.sessionExec(session.id, { code: 'await new Promise((resolve) => setTimeout(resolve, 20)); globalThis.later = 7' });
    assert.equal(awaited.exit_code, 0);
    const loop = await client.sessionExec(session.id, { code: 'while (true) {}', timeout: 0.5 });
    assert.deepEqual([loop.exit_code, loop.timed_out, loop.session_ended], [124, true, false]);
    assert.equal((await client.sessionExec(session.id, { code: 'x + later' })).value, '48');
    const thrown = await client.sessionExec(session.id, { code: 'null.field' });
    assert.equal(thrown.exit_code, 1);
    assert.match(String(thrown.error), /^TypeError: Cannot read properties of null/);
    await client.endSession(session.id);
  });

  it('a session allowed domains reaches out only through its egress proxy, which refuses a name it was not given', async () => {
    const session = await openSession({ lang: 'python', network: { allow_domains: ['api.example.org'] } });
    try {
      const cell = await client.sessionExec(session.id, {
        code: [
          'import os, socket, urllib.request, urllib.error',
          'print(os.environ["HTTPS_PROXY"])',
          'try:',
          '    urllib.request.urlopen("http://denied.example.org/", timeout=10)',
          'except urllib.error.HTTPError as error:',
          '    print(error.code, error.read().decode())',
          'try:',
          '    socket.create_connection(("1.1.1.1", 80), timeout=5)',
          '    print("direct: connected")',
          'except OSError as error:',
          '    print("direct:", type(error).__name__)',
        ].join('\n'),
      });
      assert.equal(cell.error, null, JSON.stringify(cell));
      assert.match(cell.stdout, /^http:\/\/127\.0\.0\.1:\d+\n/);
      assert.match(cell.stdout, /\n403 [^\n]*denied\.example\.org:80 is not allowed by policy\.network\.allow_domains/);
      assert.match(cell.stdout, /\ndirect: (OSError|ConnectionRefusedError|TimeoutError)\n$/);
    } finally {
      await client.endSession(session.id);
    }
  });

  it('refuses what it cannot do with stable codes, and caps live sessions', async () => {
    assert.equal((await refusal(client.session('ses_00000000000000000000000000000000'))).code, 'session.not_found');
    const bash = await refusal(openSession({ lang: 'bash' }));
    assert.deepEqual([bash.status, bash.code], [422, 'validation.invalid_request']);
    const shellless = await refusal(openSession({ lang: 'python', policy: { allow_shell: false } }));
    assert.equal(shellless.code, 'validation.invalid_request');

    const commands = await openSession({ policy: { allowed_commands: ['ls', 'cat'] } });
    assert.equal(commands.lang, null);
    const denied = await refusal(client.sessionExec(commands.id, { argv: ['rm', '-rf', '.'] }));
    assert.deepEqual([denied.status, denied.code], [403, 'policy.command_denied']);
    const shell = await refusal(client.sessionExec(commands.id, { argv: ['bash', '-c', 'ls'] }));
    assert.deepEqual([shell.status, shell.code], [403, 'policy.shell_denied']);
    const noCells = await refusal(client.sessionExec(commands.id, { code: '1' }));
    assert.equal(noCells.code, 'validation.invalid_request');

    const escape = await api(server.url, 'GET', `/v1/sessions/${commands.id}/files/a%2F..%2F..%2Fetc%2Fpasswd`);
    assert.deepEqual([escape.status, escape.json.error.code], [422, 'validation.path_escape']);
    const missing = await refusal(client.getSessionFile(commands.id, 'nothing-here'));
    assert.deepEqual([missing.status, missing.code], [404, 'session.file_not_found']);
    const json = await api(server.url, 'PUT', `/v1/sessions/${commands.id}/files/x.txt`, { not: 'bytes' });
    assert.equal(json.status, 415);

    const live: Session[] = [commands];
    while (live.length < 3) live.push(await openSession({}));
    const full = await refusal(openSession({}));
    assert.deepEqual([full.status, full.code], [503, 'sessions.full']);
    for (const session of live) await client.endSession(session.id);
    await client.endSession((await openSession({})).id);
  });

  it('an idle session ends after its idle timeout', async () => {
    const session = await openSession({ lang: 'python', idle_timeout_seconds: 1 });
    let described = await client.session(session.id);
    // Asking for its description is no request that keeps it alive.
    await waitUntil(async () => (described = await client.session(session.id)).state === 'ended', 'the idle session has ended', { seen: () => JSON.stringify(described) });
    assert.deepEqual([described.state, described.ended_reason], ['ended', 'idle for 1 s']);
  });

  it('the CLI drives a session on the service', async () => {
    const env = { AGENT_RUNNER_URL: server.url, AGENT_RUNNER_TOKEN: server.token! };
    const created = await runCli('agent-runner', ['session', 'create', '--lang', 'python'], { env });
    assert.equal(created.code, 0, created.stderr);
    const { id } = JSON.parse(created.stdout) as Session;
    const put = await runCli('agent-runner', ['session', 'put', id, 'notes.txt'], { env, stdin: 'piped in' });
    assert.equal(JSON.parse(put.stdout).bytes, 8);
    const cell = await runCli('agent-runner', ['session', 'exec', id, '--code', 'print(open("notes.txt").read())\nraise ValueError("no")'], { env });
    assert.equal(cell.code, 1);
    assert.equal(JSON.parse(cell.stdout).stdout, 'piped in\n');
    assert.equal(JSON.parse(cell.stdout).error, 'ValueError: no');
    const got = await runCli('agent-runner', ['session', 'get', id, 'notes.txt'], { env });
    assert.equal(got.stdout, 'piped in');
    const removed = await runCli('agent-runner', ['session', 'rm', id], { env });
    assert.equal(JSON.parse(removed.stdout).state, 'ended');
  });

  for (const kind of kinds.filter((kind) => kind !== 'local_process')) {
    it(`a python session on ${kind} keeps x between cells`, async () => {
      const session = await openSession({ lang: 'python', backend: { kind } });
      assert.equal(session.backend, kind);
      await client.sessionExec(session.id, { code: 'x = 41' });
      await client.putSessionFile(session.id, 'in.txt', 'file');
      const next = await client.sessionExec(session.id, { code: 'print(x + 1, open("in.txt").read())' });
      assert.equal(next.stdout, '42 file\n');
      // Its agent keeps its files in the work dir here too.
      assert.equal((await client.sessionExec(session.id, { argv: ['ln', '-s', '/', 'rootlink'] })).exit_code, 0);
      assert.equal((await refusal(client.getSessionFile(session.id, 'rootlink/etc/passwd'))).code, 'validation.path_escape');
      await client.endSession(session.id);
    });
  }
});
