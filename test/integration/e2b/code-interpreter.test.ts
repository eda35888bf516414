import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { stripVTControlCharacters } from 'node:util';
import { inflateSync } from 'node:zlib';
import { Sandbox, type Execution, type OutputMessage, type Result } from '@e2b/code-interpreter';
import type { BackendKind } from '../../../src/contract/backend-kinds.js';
import { availableKinds, kindLeftOut } from '../../helpers/backends.js';
import { testRuntime } from '../../helpers/runtime.js';
import { startServer, type ServerProcess } from '../../helpers/server.js';

/** A PNG decoded far enough to know it is one: its chunks, its size, and pixel data of that size. */
function decodePng(base64: string): { width: number; height: number } {
  const bytes = Buffer.from(base64, 'base64');
  assert.deepEqual([...bytes.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10], 'the PNG signature');
  let offset = 8;
  let width = 0;
  let height = 0;
  let bitsPerPixel = 0;
  const data: Buffer[] = [];
  for (;;) {
    const length = bytes.readUInt32BE(offset);
    const type = bytes.toString('latin1', offset + 4, offset + 8);
    const body = bytes.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      const channels = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 }[body[9]!]!;
      bitsPerPixel = channels * body[8]!;
    }
    if (type === 'IDAT') data.push(body);
    offset += 12 + length;
    if (type === 'IEND') break;
  }
  const pixels = inflateSync(Buffer.concat(data));
  // Each row: a filter byte, then its pixels.
  assert.equal(pixels.length, height * (1 + Math.ceil((width * bitsPerPixel) / 8)));
  return { width, height };
}

/**
 * The unmodified `@e2b/code-interpreter` SDK against `agent-runner serve`: cells in python
 * contexts (IPython inside the sandbox), their streams, results, charts and errors, contexts,
 * timeouts and what a cell can do to the service (forged protocol, a cell that never ends, a
 * huge result). The whole surface on local_process; a smoke on gVisor.
 */
describe('the @e2b/code-interpreter SDK against agent-runner', async () => {
  let server: ServerProcess;
  let sandbox: Sandbox;
  const kinds = await availableKinds(testRuntime(), 'run-job');
  const opts = () => ({ apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url });

  before(async () => {
    server = await startServer([]);
    sandbox = await Sandbox.create('base', opts());
  });
  after(async () => {
    await sandbox?.kill().catch(() => undefined);
    await server.stop();
  });

  it('keeps state across cells, streams stdout, stderr, results and errors in order, with the traceback', async () => {
    await sandbox.runCode('counter = 40');
    const seen: string[] = [];
    const execution = await sandbox.runCode('import sys\nprint("out")\nprint("err", file=sys.stderr)\ncounter += 2\ndisplay("shown")\ncounter', {
      onStdout: (message: OutputMessage) => void seen.push(`stdout:${message.line}`),
      onStderr: (message: OutputMessage) => void seen.push(`stderr:${message.line}`),
      onResult: (result: Result) => void seen.push(`result:${result.text}`),
    });
    assert.deepEqual(seen, ['stdout:out\n', 'stderr:err\n', 'result:shown', 'result:42']);
    assert.equal(execution.text, '42');
    assert.deepEqual(execution.logs, { stdout: ['out\n'], stderr: ['err\n'] });
    assert.ok(execution.executionCount! >= 2);

    const errors: string[] = [];
    const failed = await sandbox.runCode('def inner():\n    raise ValueError("bad value")\ninner()', { onError: (error) => void errors.push(error.name) });
    assert.equal(failed.error?.name, 'ValueError');
    assert.equal(failed.error?.value, 'bad value');
    // IPython colours its tracebacks, as E2B's do.
    assert.match(stripVTControlCharacters(failed.error!.traceback), /----> 3 inner\(\)[\s\S]*----> 2\s+raise ValueError/);
    assert.deepEqual(errors, ['ValueError']);
    assert.equal((await sandbox.runCode('counter')).text, '42', 'an error keeps the state');
  });

  it('runs `!` shell lines and `%` magics as a notebook does', async () => {
    const execution = await sandbox.runCode('!echo from the shell\n%cd /tmp');
    assert.deepEqual(execution.logs.stdout.join('').trim().split(/\r?\n/), ['from the shell', '/tmp']);
    assert.equal((await sandbox.runCode('import os; os.getcwd()')).text, '/tmp');
    await sandbox.runCode('%cd /home/user');
  });

  it('gives a DataFrame as html, text and data', async () => {
    const execution = await sandbox.runCode('import pandas as pd\npd.DataFrame({"city": ["Oslo", "Lima"], "rain": [7.5, 0.1]})');
    const [table] = execution.results;
    assert.match(table!.html!, /<table[\s\S]*<td>Oslo<\/td>[\s\S]*<td>7.5<\/td>/);
    assert.match(table!.text!, /city\s+rain/);
    assert.deepEqual(table!.data, { city: ['Oslo', 'Lima'], rain: [7.5, 0.1] });
  });

  it('shows a matplotlib bar chart and line chart as png with the chart read from the figure', async () => {
    const bars = await sandbox.runCode(
      'import matplotlib.pyplot as plt\nplt.figure()\nplt.bar(["apples", "pears", "plums"], [3, 7, 5], label="sold")\nplt.title("Fruit")\nplt.xlabel("Kind")\nplt.ylabel("Count (kg)")\nplt.show()',
    );
    const [bar] = bars.results;
    assert.ok(decodePng(bar!.png!).width > 100);
    assert.equal(bar!.chart?.type, 'bar');
    assert.equal(bar!.chart?.title, 'Fruit');
    assert.deepEqual(
      bar!.chart?.elements.map((element: { label: string; value: number; group: string }) => [element.label, element.value, element.group]),
      [
        ['apples', 3, 'sold'],
        ['pears', 7, 'sold'],
        ['plums', 5, 'sold'],
      ],
    );
    assert.equal((bar!.chart as { y_unit?: string }).y_unit, 'kg');

    // A figure left open at the end of a cell is shown too.
    const lines = await sandbox.runCode(
      'import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([0, 1, 2], [0, 1, 4], label="square")\nax.plot([0, 1, 2], [0, 1, 2], label="linear")',
    );
    const line = lines.results.find((result) => result.chart);
    assert.ok(line?.png && decodePng(line.png).height > 100);
    assert.equal(line.chart?.type, 'line');
    assert.deepEqual(
      line.chart?.elements.map((element: { label: string; points: number[][] }) => [element.label, element.points]),
      [
        [
          'square',
          [
            [0, 0],
            [1, 1],
            [2, 4],
          ],
        ],
        [
          'linear',
          [
            [0, 0],
            [1, 1],
            [2, 2],
          ],
        ],
      ],
    );
  });

  it('keeps contexts apart, each with its cwd; lists, restarts and removes them', async () => {
    const first = await sandbox.createCodeContext({ cwd: '/tmp' });
    const second = await sandbox.createCodeContext({ language: 'python' });
    assert.equal(first.cwd, '/tmp');
    await sandbox.runCode('name = "first"', { context: first });
    await sandbox.runCode('name = "second"', { context: second });
    assert.equal((await sandbox.runCode('name + " in " + __import__("os").getcwd()', { context: first })).text, 'first in /tmp');
    assert.equal((await sandbox.runCode('name + " in " + __import__("os").getcwd()', { context: second })).text, 'second in /home/user');
    const listed = (await sandbox.listCodeContexts()).map((context) => context.id);
    assert.ok(listed.includes(first.id) && listed.includes(second.id));

    await sandbox.restartCodeContext(first);
    const forgotten = await sandbox.runCode('name', { context: first });
    assert.equal(forgotten.error?.name, 'NameError');
    await sandbox.removeCodeContext(second);
    assert.ok(!(await sandbox.listCodeContexts()).some((context) => context.id === second.id));
    // The SDK leaves its request timer (60 s by default) running when a call is refused, which
    // held this file's process for a minute after its tests: a short one for the refused calls.
    await assert.rejects(sandbox.runCode('1', { context: second, requestTimeoutMs: 10_000 }), /not found/i);
    await assert.rejects(sandbox.runCode('1', { language: 'cobol', requestTimeoutMs: 10_000 }), /400/);
    await assert.rejects(sandbox.createCodeContext({ language: 'fortran' }), /400/);
  });

  it("lists the default python and javascript contexts from the start, as E2B's server does; their first cells run in them", async () => {
    const fresh = await Sandbox.create('base', opts());
    try {
      const listed = await fresh.listCodeContexts();
      assert.deepEqual(
        listed.map((context) => [context.language, context.cwd]),
        [
          ['python', '/home/user'],
          ['javascript', '/home/user'],
        ],
      );
      const python = listed[0]!;
      await fresh.runCode('seen = "default"');
      assert.equal((await fresh.runCode('seen', { context: python })).text, 'default');
      assert.equal((await fresh.runCode('globalThis.seen = 1; 2', { context: listed[1]! })).text, '2');
      assert.equal((await fresh.runCode('seen', { language: 'js' })).text, '1');
      // A created context comes after them.
      const created = await fresh.createCodeContext();
      assert.deepEqual(
        (await fresh.listCodeContexts()).map((context) => context.id),
        [python.id, listed[1]!.id, created.id],
      );
    } finally {
      await fresh.kill();
    }
  });

  it('a context whose directory cannot be entered works in the home, and its first cell is told why', async () => {
    const context = await sandbox.createCodeContext({ cwd: '/no/such/dir' });
    assert.equal(context.cwd, '/no/such/dir');
    assert.ok((await sandbox.listCodeContexts()).some((listed) => listed.id === context.id && listed.cwd === '/no/such/dir'));
    const first = await sandbox.runCode('import os; os.getcwd()', { context });
    assert.equal(first.text, '/home/user');
    assert.deepEqual(first.logs.stderr, ["[the context's directory /no/such/dir could not be entered (No such file or directory); it works in /home/user]\n"]);
    assert.deepEqual((await sandbox.runCode('1', { context })).logs.stderr, []);
    await sandbox.removeCodeContext(context);
  });

  it('runs javascript and bash contexts, each keeping its own state, streams and errors', async () => {
    const js = await sandbox.createCodeContext({ language: 'js' });
    assert.equal(js.language, 'javascript');
    await sandbox.runCode('const items = [1, 2, 3]', { context: js });
    const sum = await sandbox.runCode('console.log("summing"); items.reduce((a, b) => a + b)', { context: js });
    assert.deepEqual([sum.text, sum.logs.stdout], ['6', ['summing\n']]);
    assert.equal((await sandbox.runCode('null.x', { context: js })).error?.name, 'TypeError');
    assert.equal((await sandbox.runCode('await new Promise((resolve) => setTimeout(resolve, 10)); globalThis.late = "awaited"', { context: js })).error, undefined);
    assert.equal((await sandbox.runCode('late', { context: js })).text, 'awaited');
    // The language's default context is another one.
    assert.equal((await sandbox.runCode('typeof items', { language: 'javascript' })).text, 'undefined');

    const bash = await sandbox.createCodeContext({ language: 'bash', cwd: '/tmp' });
    const here = await sandbox.runCode('pwd; export GREETING=hi; cd /', { context: bash });
    assert.deepEqual(here.logs.stdout, ['/tmp\n']);
    const echoed = await sandbox.runCode('echo "$GREETING from $(pwd)"; echo warned >&2', { context: bash, envs: { EXTRA: 'x' } });
    assert.deepEqual([echoed.logs.stdout, echoed.logs.stderr], [['hi from /\n'], ['warned\n']]);
    const failed = await sandbox.runCode('false', { context: bash });
    assert.deepEqual([failed.error?.name, failed.error?.value], ['ExitCode', '1']);
    await assert.rejects(sandbox.runCode('sleep 30', { context: bash, timeoutMs: 1_000 }), /timed out/i);
    assert.deepEqual((await sandbox.runCode('echo "$GREETING ${EXTRA-gone}"', { context: bash })).logs.stdout, ['hi gone\n']);
  });

  it('runs typescript cells: their types stripped on the host, run by a javascript kernel that keeps its state', async () => {
    const hello = await sandbox.runCode('const message: string = "Hello World!"; console.log(message)', { language: 'ts' });
    assert.deepEqual(hello.logs.stdout, ['Hello World!\n']);
    assert.equal((await sandbox.runCode('interface Box { size: number }\nconst box: Box = { size: message.length }\nbox.size', { language: 'typescript' })).text, '12');
    assert.equal((await sandbox.runCode('process.cwd()', { language: 'ts' })).text, '/home/user');
    assert.equal((await sandbox.runCode("import { join } from 'node:path'\nawait Promise.resolve(join('a', 'b') as string)", { language: 'ts' })).text, 'a/b');
    const broken = await sandbox.runCode('const x: = 1', { language: 'ts' });
    assert.equal(broken.error?.name, 'SyntaxError');
    assert.match(broken.error!.value, /Unexpected "="/);
    const context = await sandbox.createCodeContext({ language: 'ts' });
    assert.equal(context.language, 'typescript');
    assert.equal((await sandbox.runCode('typeof message', { context })).text, 'undefined', 'a context of its own');
  });

  it("runs java cells on JShell: state kept, the last expression's value, env vars as system properties as E2B's java kernel gives them", async () => {
    const withEnv = await Sandbox.create('base', { ...opts(), envs: { TEST_ENV_VAR: 'supertest' } });
    try {
      assert.equal((await withEnv.runCode('System.getProperty("user.dir")', { language: 'java' })).results[0]?.text, '/home/user');
      assert.equal((await withEnv.runCode('System.getProperty("TEST_ENV_VAR")', { language: 'java' })).text, 'supertest');
      const overwritten = await withEnv.runCode('System.getProperty("TEST_ENV_VAR") + " " + System.getProperty("FOO")', {
        language: 'java',
        envs: { TEST_ENV_VAR: 'overwrite', FOO: 'bar' },
      });
      assert.equal(overwritten.text, 'overwrite bar');
      assert.equal((await withEnv.runCode('System.getProperty("TEST_ENV_VAR") + " " + System.getProperty("FOO", "default")', { language: 'java' })).text, 'supertest default');

      const context = await withEnv.createCodeContext({ language: 'java', cwd: '/tmp' });
      assert.deepEqual([context.language, context.cwd], ['java', '/tmp']);
      assert.equal((await withEnv.runCode('System.getProperty("user.dir")', { context })).text, '/tmp');
      const printed = await withEnv.runCode('int total = 0;\nfor (int i = 1; i <= 3; i++) total += i;\nSystem.out.println("summed");\ntotal', { context });
      assert.deepEqual([printed.logs.stdout, printed.text], [['summed\n'], '6']);
      assert.equal((await withEnv.runCode('total * 7', { context })).text, '42');
      const thrown = await withEnv.runCode('Integer.parseInt("x")', { context });
      assert.deepEqual([thrown.error?.name, thrown.error?.value], ['java.lang.NumberFormatException', 'For input string: "x"']);
      await assert.rejects(withEnv.runCode('Thread.sleep(60_000)', { context, timeoutMs: 2_000 }), /timed out/i);
      assert.equal((await withEnv.runCode('total', { context })).text, '6');
    } finally {
      await withEnv.kill();
    }
  });

  it("runs r cells: state kept, visible values as R prints them, env vars for one run over the sandbox's", async () => {
    const withEnv = await Sandbox.create('base', { ...opts(), envs: { TEST_ENV_VAR: 'supertest' } });
    try {
      assert.equal((await withEnv.runCode('getwd()', { language: 'r' })).results[0]?.text, '[1] "/home/user"');
      assert.equal((await withEnv.runCode('Sys.getenv("TEST_ENV_VAR")', { language: 'r' })).text, '[1] "supertest"');
      const overwritten = await withEnv.runCode('paste(Sys.getenv("TEST_ENV_VAR"), Sys.getenv("FOO"))', { language: 'r', envs: { TEST_ENV_VAR: 'overwrite', FOO: 'bar' } });
      assert.equal(overwritten.text, '[1] "overwrite bar"');
      assert.equal((await withEnv.runCode('paste(Sys.getenv("TEST_ENV_VAR"), Sys.getenv("FOO", unset = "default"))', { language: 'r' })).text, '[1] "supertest default"');

      const context = await withEnv.createCodeContext({ language: 'r', cwd: '/tmp' });
      assert.deepEqual([context.language, context.cwd], ['r', '/tmp']);
      assert.equal((await withEnv.runCode('getwd()', { context })).text, '[1] "/tmp"');
      const printed = await withEnv.runCode('total <- sum(1:3)\ncat("summed\\n")\ntotal', { context });
      assert.deepEqual([printed.logs.stdout, printed.text], [['summed\n'], '[1] 6']);
      assert.equal((await withEnv.runCode('total * 7', { context })).text, '[1] 42');
      const failed = await withEnv.runCode('stop("boom")', { context });
      assert.deepEqual([failed.error?.name, failed.error?.value], ['Error', 'boom']);
      await assert.rejects(withEnv.runCode('Sys.sleep(60)', { context, timeoutMs: 2_000 }), /timed out/i);
      assert.equal((await withEnv.runCode('total', { context })).text, '[1] 6');
    } finally {
      await withEnv.kill();
    }
  });

  it("rejects a cell whose sandbox is killed under it with the SDK's descriptive error: the connection is cut, as E2B's is", async () => {
    const doomed = await Sandbox.create('base', opts());
    let killed: Promise<unknown> | undefined;
    const running = doomed.runCode('import time\nprint("started", flush=True)\ntime.sleep(300)', {
      timeoutMs: 300_000,
      onStdout: () => void (killed ??= doomed.kill()),
    });
    await assert.rejects(running, (error: Error) => {
      assert.equal(error.name, 'TimeoutError');
      assert.match(error.message, /sandbox was killed while the request was in progress/);
      return true;
    });
    await killed;
  });

  it('sets env vars for one run only', async () => {
    await sandbox.runCode('import os; os.environ["KEPT"] = "before"');
    const during = await sandbox.runCode('import os; (os.environ.get("RUN_ONLY"), os.environ.get("KEPT"))', { envs: { RUN_ONLY: 'yes', KEPT: 'during' } });
    assert.equal(during.text, "('yes', 'during')");
    assert.equal((await sandbox.runCode('import os; (os.environ.get("RUN_ONLY"), os.environ.get("KEPT"))')).text, "(None, 'before')");
  });

  it('interrupts a cell at its timeout and keeps the context', async () => {
    await sandbox.runCode('kept = "still here"');
    await assert.rejects(sandbox.runCode('import time\nwhile True: time.sleep(0.1)', { timeoutMs: 1_000 }), /timed out/i);
    assert.equal((await sandbox.runCode('kept')).text, 'still here');
  });

  it('restarts a context whose cell ignores the interrupt, saying so; the sandbox and service go on', async () => {
    const context = await sandbox.createCodeContext();
    await sandbox.runCode('state = 1', { context });
    // The kernel sets its SIGINT handler anew before each cell: the cell that ignores it must be the one that loops.
    // Its timeout leaves room for signal.signal to run first (an interrupt before it is a plain
    // KeyboardInterrupt): not the subject; a loaded CI machine needs room.
    await assert.rejects(sandbox.runCode('import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass', { context, timeoutMs: 3_000 }), /timed out/i);
    const after = await sandbox.runCode('"state" in globals()', { context });
    assert.equal(after.text, 'False', 'the context came back with a new kernel');
    assert.match(after.logs.stderr.join(''), /a cell did not stop when interrupted; the context restarted without its state/);
    assert.equal((await sandbox.runCode('1 + 1')).text, '2');
  });

  it("cannot forge the bridge's protocol: a cell writing frames to its stdout or the bridge's fds is just output", async () => {
    const frame = '{"id":1,"done":true}';
    const forged = await sandbox.runCode(
      [
        'import os, struct, glob',
        `payload = struct.pack(">I", ${frame.length}) + b'${frame}'`,
        'os.write(1, payload)',
        'reached = []',
        'for fd in glob.glob("/proc/*/fd/1"):',
        '    try:',
        '        with open(fd, "wb") as out: out.write(payload); reached.append(fd)',
        '    except OSError: pass',
        'print("after")',
      ].join('\n'),
    );
    assert.ok(forged.logs.stdout.join('').includes('after'), JSON.stringify(forged.logs));
    assert.equal(forged.error, undefined);
    assert.equal((await sandbox.runCode('21 * 2')).text, '42', 'the context still answers in order');
  });

  it('cuts a 100 MB result and keeps serving', async () => {
    const huge: Execution = await sandbox.runCode('"x" * 100_000_000');
    assert.equal(huge.results.length, 1);
    assert.match(huge.text!, /\[result cut: its formats were \d+ bytes/);
    assert.ok(huge.text!.length < 1024 * 1024);
    const printed = await sandbox.runCode('print("y" * 5_000_000)');
    assert.ok(printed.logs.stdout.join('').length >= 1024 * 1024);
    assert.equal((await sandbox.runCode('1 + 1')).text, '2');
  });

  for (const kind of ['gvisor'] as const satisfies readonly BackendKind[]) {
    const skip = kindLeftOut(kind) || (!kinds.includes(kind) && `${kind} is not available here`);
    it(`runs cells and draws a chart on ${kind}; its contexts keep their state across a pause that keeps memory`, { skip }, async () => {
      const local = await startServer([], { env: { AGENT_RUNNER_BACKENDS__DEFAULT: kind } });
      try {
        const options = { apiKey: local.token!, apiUrl: local.url, sandboxUrl: local.url };
        const other = await Sandbox.create('base', options);
        assert.equal((await other.runCode('x = 20\nx * 2 + 2')).text, '42');
        const chart = await other.runCode('import matplotlib.pyplot as plt\nplt.pie([1, 3], labels=["a", "b"])\nplt.show()');
        assert.equal(chart.results[0]?.chart?.type, 'pie');
        assert.ok(decodePng(chart.results[0]!.png!).width > 0);
        const context = await other.createCodeContext({ cwd: '/tmp' });
        await other.runCode('y = 7', { context });

        // The kernels were kept with the sandbox's memory: the same contexts, their variables as they were.
        assert.equal(await other.pause(), true);
        const resumed = await Sandbox.connect(other.sandboxId, options);
        assert.equal((await resumed.runCode('x + 1')).text, '21');
        assert.equal((await resumed.runCode('y * 6', { context })).text, '42');
        assert.deepEqual((await resumed.listCodeContexts()).map((listed) => listed.id).includes(context.id), true);
        await resumed.kill();
      } finally {
        await local.stop();
      }
    });
  }
});
