import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import { BridgeMessageSchema, BridgeReadySchema, type BridgeMessage, type OutputLine } from '../../../src/contract/code-interpreter.js';
import { hostProcessesMatching } from '../../helpers/processes.js';
import { waitUntil } from '../../helpers/wait.js';
import { startGuest, stopGuests, type GuestProcess } from './guest-process.js';

const source = (name: string) => readFileSync(new URL(`../../../src/interpreter/python/${name}`, import.meta.url), 'utf8');
/** The bridge's argv before its language, as kernel-bridge.ts gives it: its source, then its parts' (`kernels`: bridge-kernels.py's unless given). */
const bridgeArgv = (kernels = source('bridge-kernels.py')) => ['/usr/bin/python3', '-I', '-c', source('kernel-bridge.py'), source('bridge-lines.py'), kernels];

/** charts.py on a figure drawn by `drawing` (matplotlib's Agg backend, no kernel): the chart it reads. */
function chartOf(drawing: string): Record<string, unknown> {
  const program = [
    'import json, sys, types',
    'import matplotlib',
    'matplotlib.use("Agg")',
    'import matplotlib.pyplot as plt',
    'charts = types.ModuleType("charts")',
    'exec(sys.argv[1], charts.__dict__)',
    'fig = plt.figure()',
    'exec(sys.argv[2])',
    'print(json.dumps(charts.figure_chart(fig)))',
  ].join('\n');
  return JSON.parse(execFileSync('/usr/bin/python3', ['-c', program, source('charts.py'), drawing], { encoding: 'utf8' })) as Record<string, unknown>;
}

describe('charts.py: a figure as data', () => {
  it('reads a line chart: each line its label and points, the axes their labels, units, ticks and scale', () => {
    const chart = chartOf('plt.plot([1, 2, 3], [2, 4, 8], label="growth")\nplt.xlabel("Time (s)")\nplt.ylabel("Size [MB]")\nplt.title("T")\nplt.yscale("log")');
    assert.equal(chart.type, 'line');
    assert.equal(chart.title, 'T');
    assert.deepEqual(chart.elements, [
      {
        label: 'growth',
        points: [
          [1, 2],
          [2, 4],
          [3, 8],
        ],
      },
    ]);
    assert.deepEqual([chart.x_label, chart.x_unit, chart.y_unit, chart.y_scale, chart.x_scale], ['Time (s)', 's', 'MB', 'log', 'linear']);
    assert.ok(Array.isArray(chart.x_ticks) && (chart.x_tick_labels as string[]).length === (chart.x_ticks as number[]).length);
  });

  it('reads a scatter plot, a pie, and bars grouped by their call (horizontal bars too)', () => {
    const scatter = chartOf('plt.scatter([1, 2], [3, 4], label="dots")');
    assert.deepEqual(
      [scatter.type, scatter.elements],
      [
        'scatter',
        [
          {
            label: 'dots',
            points: [
              [1, 3],
              [2, 4],
            ],
          },
        ],
      ],
    );
    const pie = chartOf('plt.pie([1, 1, 2], labels=["a", "b", "c"])');
    assert.deepEqual(pie.elements, [
      { label: 'a', angle: 90, radius: 1 },
      { label: 'b', angle: 90, radius: 1 },
      { label: 'c', angle: 180, radius: 1 },
    ]);
    const bars = chartOf('plt.bar(["x", "y"], [1, 2], label="2024")\nplt.bar(["x", "y"], [3, 4], bottom=[1, 2], label="2025")');
    assert.deepEqual(bars.elements, [
      { label: 'x', value: 1, group: '2024' },
      { label: 'y', value: 2, group: '2024' },
      { label: 'x', value: 3, group: '2025' },
      { label: 'y', value: 4, group: '2025' },
    ]);
    const across = chartOf('plt.barh(["p", "q"], [5, 6])\nplt.xlabel("Amount (kg)")');
    assert.deepEqual(
      [across.type, across.elements, across.y_unit],
      [
        'bar',
        [
          { label: 'p', value: 5, group: 'Group 0' },
          { label: 'q', value: 6, group: 'Group 0' },
        ],
        'kg',
      ],
    );
  });

  it("reads a pie's angles to the precision matplotlib keeps them (its thetas are float32)", () => {
    const pie = chartOf('plt.pie([90, 10], labels=["No", "Yes"], startangle=90)');
    assert.deepEqual(pie.elements, [
      { label: 'No', angle: 324, radius: 1 },
      { label: 'Yes', angle: 36, radius: 1 },
    ]);
  });

  it('reads box plots: quartiles, median, whiskers and outliers', () => {
    const chart = chartOf('plt.boxplot([[1, 2, 3, 4, 5, 40], [2, 3, 4]], labels=["a", "b"], patch_artist=True)');
    assert.equal(chart.type, 'box_and_whisker');
    assert.deepEqual(chart.elements, [
      { label: 'a', min: 1, first_quartile: 2.25, median: 3.5, third_quartile: 4.75, max: 5, outliers: [40] },
      { label: 'b', min: 2, first_quartile: 2.5, median: 3, third_quartile: 3.5, max: 4, outliers: [] },
    ]);
  });

  it('reads several axes as a superchart, and a figure without data as nothing', () => {
    const chart = chartOf('fig.suptitle("Both")\nleft = fig.add_subplot(1, 2, 1)\nleft.plot([0, 1], [1, 0])\nright = fig.add_subplot(1, 2, 2)\nright.pie([1])');
    assert.equal(chart.type, 'superchart');
    assert.equal(chart.title, 'Both');
    assert.deepEqual(
      (chart.elements as Array<{ type: string }>).map((element) => element.type),
      ['line', 'pie'],
    );
    assert.deepEqual(chartOf('fig.add_subplot(1, 1, 1)'), {});
  });
});

/**
 * kernel-bridge.py run on the host, as the agent starts it in a sandbox (`python3 -I -c SOURCE
 * PARTS... python charts startup`), with an ipykernel behind it: every frame checked against the contract.
 */
describe('kernel-bridge.py', () => {
  let bridge: GuestProcess;
  let ids = 0;
  // The kernel's modules and IPython's dir go to the temp dir, as in a sandbox's own /tmp.
  const scratch = mkdtempSync(join(tmpdir(), 'kernel-bridge-'));
  before(async () => {
    const argv = [...bridgeArgv(), 'python', source('charts.py'), source('startup.py'), source('kernel-python.py')];
    bridge = startGuest(argv, { frameFd: 1, env: { ...process.env, TMPDIR: scratch } });
    const ready = await bridge.next();
    assert.ok(Value.Check(BridgeReadySchema, ready) && (ready as { ready: boolean }).ready, JSON.stringify(ready));
  });
  after(async () => {
    bridge.endInput();
    await bridge.exited;
    stopGuests();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** One request; the frames up to its answer (its `done`, or its reply), each valid. */
  async function ask(request: Record<string, unknown>): Promise<BridgeMessage[]> {
    const id = ++ids;
    bridge.send({ ...request, id });
    const frames: BridgeMessage[] = [];
    for (;;) {
      const frame = await bridge.next();
      assert.ok(Value.Check(BridgeMessageSchema, frame), `out of contract: ${JSON.stringify(frame)}`);
      frames.push(frame as BridgeMessage);
      if ((frame as BridgeMessage).id === id && !('output' in (frame as object))) return frames;
    }
  }
  const outputs = (frames: BridgeMessage[]): OutputLine[] => frames.flatMap((frame) => ('output' in frame ? [frame.output] : []));

  it('runs a cell: its count, its prints and its value as lines, then done', async () => {
    const frames = await ask({ op: 'execute', code: 'print("hi")\n6 * 7', env_vars: {} });
    assert.deepEqual(
      outputs(frames).map((line) => (line.type === 'stdout' ? { type: line.type, text: line.text } : line)),
      [
        { type: 'number_of_executions', execution_count: 1 },
        { type: 'stdout', text: 'hi\n' },
        { type: 'result', is_main_result: true, text: '42' },
      ],
    );
    assert.deepEqual(frames.at(-1), { id: ids, done: true });
  });

  it('sends no empty stream line: a `!` line is its output alone, as a writing of nothing is nothing', async () => {
    const frames = await ask({ op: 'execute', code: '!echo from the shell\nprint("", end="")', env_vars: {} });
    assert.deepEqual(
      outputs(frames)
        .filter((line) => line.type === 'stdout')
        .map((line) => (line as { text: string }).text),
      ['from the shell\r\n'],
    );
  });

  it('answers a malformed or unknown request with an error and goes on', async () => {
    assert.deepEqual(await ask({ op: 'transmogrify' }), [{ id: ids, error: "unknown op 'transmogrify'" }]);
    bridge.send({ op: 'execute', code: '1' });
    assert.deepEqual(await bridge.next(), { id: 0, error: 'invalid request: no id' });
    assert.equal(outputs(await ask({ op: 'execute', code: '2', env_vars: {} })).at(-1)?.type, 'result');
  });

  it('interrupts a running cell: KeyboardInterrupt, the kernel kept', async () => {
    // Kept by a cell of its own: the interrupt may stop the next one before its first line.
    await ask({ op: 'execute', code: 'kept = 1', env_vars: {} });
    const id = ++ids;
    bridge.send({ op: 'execute', id, code: 'import time\ntime.sleep(60)', env_vars: {} });
    assert.equal(((await bridge.next()) as { output: OutputLine }).output.type, 'number_of_executions');
    bridge.send({ op: 'interrupt', id: ++ids });
    const frames: unknown[] = [];
    while (!frames.some((frame) => (frame as { done?: boolean }).done)) frames.push(await bridge.next());
    assert.ok(
      frames.some((frame) => (frame as { output?: { name?: string } }).output?.name === 'KeyboardInterrupt'),
      JSON.stringify(frames),
    );
    assert.ok(
      frames.some((frame) => JSON.stringify(frame) === JSON.stringify({ id: ids })),
      'the interrupt answered',
    );
    assert.equal((outputs(await ask({ op: 'execute', code: 'kept', env_vars: {} })).at(-1) as { text: string }).text, '1');
  });

  it('interrupts a cell even after an earlier cell ignored SIGINT: each cell gets the interrupt anew', async () => {
    await ask({ op: 'execute', code: 'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)', env_vars: {} });
    const id = ++ids;
    bridge.send({ op: 'execute', id, code: 'import time\ntime.sleep(60)', env_vars: {} });
    assert.equal(((await bridge.next()) as { output: OutputLine }).output.type, 'number_of_executions');
    bridge.send({ op: 'interrupt', id: ++ids });
    const frames: unknown[] = [];
    while (!frames.some((frame) => (frame as { done?: boolean }).done)) frames.push(await bridge.next());
    const names = frames.flatMap((frame) => ((frame as { output?: { name?: string } }).output?.name ?? []) as string[]);
    assert.deepEqual(names, ['KeyboardInterrupt'], 'interrupted, not a kernel replaced');
  });

  it('an interrupt sent right behind its cell, before the kernel has read it, stops that cell, not the kernel', async () => {
    await ask({ op: 'execute', code: 'kept = 2', env_vars: {} });
    bridge.send({ op: 'execute', id: ++ids, code: 'import time\ntime.sleep(60)', env_vars: {} });
    bridge.send({ op: 'interrupt', id: ++ids });
    const frames: unknown[] = [];
    while (!frames.some((frame) => (frame as { done?: boolean }).done)) frames.push(await bridge.next());
    const names = frames.flatMap((frame) => ((frame as { output?: { name?: string } }).output?.name ?? []) as string[]);
    assert.deepEqual(names, ['KeyboardInterrupt'], JSON.stringify(frames));
    assert.equal((outputs(await ask({ op: 'execute', code: 'kept', env_vars: {} })).at(-1) as { text: string }).text, '2');
  });

  it('an interrupt between cells is answered and touches no later cell', async () => {
    assert.deepEqual(await ask({ op: 'interrupt' }), [{ id: ids }]);
    assert.equal((outputs(await ask({ op: 'execute', code: 'import time\ntime.sleep(0.2)\n6 * 7', env_vars: {} })).at(-1) as { text: string }).text, '42');
  });

  it('a result whose format is bytes travels in base64, as Jupyter sends it', async () => {
    const code = 'import base64\nclass Dot:\n    def _repr_png_(self):\n        return base64.b64decode("iVBORw0KGgo=")\nDot()';
    const result = outputs(await ask({ op: 'execute', code, env_vars: {} })).find((line) => line.type === 'result') as { png?: string };
    assert.equal(result.png, 'iVBORw0KGgo=');
  });

  it("a PIL image shown (Image.show()) or saved to a file is a png result, as in E2B's kernel", async () => {
    const pngs = async (code: string) =>
      outputs(await ask({ op: 'execute', code, env_vars: {} })).flatMap((line) => (line.type === 'result' && typeof line.png === 'string' ? [line.png.slice(0, 4)] : []));
    // The PNG signature, in base64.
    assert.deepEqual(await pngs('from PIL import Image\nimage = Image.new("RGB", (4, 4), "red")\nimage.show()\nprint("done")'), ['iVBO']);
    assert.deepEqual(await pngs(`image.save(${JSON.stringify(join(scratch, 'saved.png'))})`), ['iVBO']);
    assert.deepEqual(await pngs('import io\nimage.save(io.BytesIO(), "PNG")'), [], 'saved to a stream: nothing shown');
  });

  it('a kernel that ended between cells is replaced at the next cell, which says so; the bridge goes on', async () => {
    const started = await ask({
      op: 'execute',
      code: 'import os, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), os._exit(3))).start()\nos.getpid()',
      env_vars: {},
    });
    const kernel = Number((outputs(started).at(-1) as { text: string }).text);
    assert.ok(kernel > 0, JSON.stringify(started));
    // Gone (or a zombie its parent has not reaped yet) before the next cell, however slow the machine.
    const ended = () => {
      try {
        return readFileSync(`/proc/${kernel}/stat`, 'utf8').split(') ').at(-1)!.startsWith('Z');
      } catch {
        return true;
      }
    };
    await waitUntil(ended, `the kernel (pid ${kernel}) has ended`);
    const error = outputs(await ask({ op: 'execute', code: '1', env_vars: {} })).find((line) => line.type === 'error') as { name: string; traceback: string };
    assert.deepEqual([error.name, error.traceback], ['KernelDied', '']);
    assert.equal((outputs(await ask({ op: 'execute', code: '6 * 7', env_vars: {} })).at(-1) as { text: string }).text, '42');
  });

  it('restarts its kernel on request: the state goes, and what its cells started', async () => {
    const marker = `${3000 + Math.floor(Math.random() * 900)}`;
    // One child of the kernel, one a shell left behind (no longer the kernel's child, still in its group).
    await ask({ op: 'execute', code: `gone = 1\nimport subprocess\nsubprocess.Popen(["sleep", "${marker}"])\nsubprocess.run("sleep ${marker}1 &", shell=True)`, env_vars: {} });
    // The shell's background child is forked before the shell exits, but may exec sleep after the
    // cell is answered: on a loaded machine it was still the shell's copy when first looked at.
    await waitUntil(() => hostProcessesMatching(`sleep ${marker}`).length === 2, "both of the cell's sleeps run", {
      seen: () => hostProcessesMatching(`sleep ${marker}`).join(', '),
    });
    assert.deepEqual(await ask({ op: 'restart' }), [{ id: ids }]);
    assert.deepEqual(hostProcessesMatching(`sleep ${marker}`), []);
    const error = outputs(await ask({ op: 'execute', code: 'gone', env_vars: {} })).find((line) => line.type === 'error');
    assert.equal((error as { name: string }).name, 'NameError');
  });
});

/** The bridge with a kernel of our own (bash, or node with kernel-node.cjs): cells in order, whatever a cell writes where. */
describe('kernel-bridge.py with bash, javascript, java and r kernels', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'kernel-bridge-own-'));
  const bridges: GuestProcess[] = [];
  after(async () => {
    for (const bridge of bridges) bridge.endInput();
    await Promise.all(bridges.map((bridge) => bridge.exited));
    stopGuests();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** A bridge with the kernel for `language`; its `run` sends a cell (and, asked to, an interrupt right behind it) and answers the cell's lines. */
  async function start(
    language: 'bash' | 'javascript' | 'java' | 'r',
  ): Promise<(code: string, interruptAtOnce?: boolean, envVars?: Record<string, string>) => Promise<OutputLine[]>> {
    const programs = { bash: [], javascript: ['node/kernel-node.cjs'], java: ['java/JavaKernel.java'], r: ['r/kernel-r.R'] }[language];
    const extra = programs.map((path) => readFileSync(new URL(`../../../src/interpreter/${path}`, import.meta.url), 'utf8'));
    const bridge = startGuest([...bridgeArgv(), language, ...extra], { frameFd: 1, env: { ...process.env, TMPDIR: scratch } });
    bridges.push(bridge);
    assert.deepEqual(await bridge.next(), { ready: true, version: '1', language });
    let id = 0;
    return async (code, interruptAtOnce = false, envVars = {}) => {
      bridge.send({ op: 'execute', id: ++id, code, env_vars: envVars });
      if (interruptAtOnce) bridge.send({ op: 'interrupt', id: ++id });
      const lines: OutputLine[] = [];
      for (;;) {
        const frame = (await bridge.next()) as BridgeMessage;
        assert.ok(Value.Check(BridgeMessageSchema, frame), JSON.stringify(frame));
        if ('output' in frame) lines.push(frame.output);
        else if ('done' in frame) return lines.filter((line) => line.type !== 'number_of_executions');
      }
    };
  }
  const text = (lines: OutputLine[]) => lines.map((line) => ('text' in line ? line.text : `${line.type}:${'value' in line ? line.value : ''}`)).join('');
  // A cell's stdout, stderr and result: kernels whose stdout and stderr come on pipes of their own
  // (java's, R's) keep the order within each, not between them.
  const streams = (lines: OutputLine[]) => ['stdout', 'stderr', 'result'].map((type) => text(lines.filter((line) => line.type === type)));

  it('bash: a cell writing end-of-cell reports of its own to the control fd ends no cell but its own', async () => {
    const run = await start('bash');
    assert.equal(text(await run('echo garbage >&$__agent_runner_control; echo \'{"status": 7}\' >&$__agent_runner_control; echo after')), 'after\n');
    assert.equal(text(await run('echo second')), 'second\n');
    assert.equal(text(await run('false')), 'error:1');
    assert.equal(text(await run('yes | head -c 3000000 | wc -c')), '3000000\n');
    // Half a line left on the control fd: the kernel's next report still stands on a line of its own.
    assert.equal(text(await run('printf partial >&$__agent_runner_control; echo half')), 'half\n');
    assert.equal(text(await run('echo whole')), 'whole\n');
  });

  it('javascript: cells see none of the kernel’s names, and a forged report ends nothing', async () => {
    const run = await start('javascript');
    // The bridge sends a value as the kernel says it (util.inspect: a string in quotes); E2B's faces unquote it.
    assert.equal(text(await run('const fs = require("node:fs"); typeof report')), "'undefined'");
    assert.equal(text(await run('fs.writeSync(Number(process.argv[1]), JSON.stringify({ done: true, result: "forged" }) + "\\n"); "real"')), "'real'");
    assert.equal(text(await run('1 + 1')), '2');
  });

  it('javascript: a top-level-await cell has its last expression as its value, and its declarations stay', async () => {
    const run = await start('javascript');
    assert.equal(text(await run("\n    await Promise.resolve('Hello World!')\n    ")), "'Hello World!'");
    assert.equal(text(await run('const later = await Promise.resolve(41)')), '');
    assert.equal(text(await run('later + 1')), '42');
    assert.equal(text(await run('await null; throw new RangeError("late")')), 'error:late');
  });

  it('javascript: static imports run in the one global context, as `await import()`', async () => {
    const run = await start('javascript');
    const cell =
      "\n    import { readFileSync as read } from 'fs'\n    import path, * as paths from 'node:path'\n    import {\n      EOL,\n    } from 'node:os'\n    import 'node:util'\n    console.log(typeof read, typeof path.join, typeof paths.join, JSON.stringify(EOL))\n    ";
    assert.equal(text(await run(cell)), 'function function function "\\n"\n');
    assert.equal(text(await run('typeof read')), "'function'");
    assert.match(text(await run("import { nothing } from 'no-such-package'")), /^error:Cannot find package 'no-such-package' imported from /);
  });

  it('bash and javascript: an interrupt sent right behind its cell stops that cell, not the kernel', async () => {
    const bash = await start('bash');
    assert.equal(text(await bash('kept=3')), '');
    assert.equal(text(await bash('sleep 60', true)), 'error:130');
    assert.equal(text(await bash('echo $kept')), '3\n');
    const javascript = await start('javascript');
    assert.equal(text(await javascript('globalThis.kept = 4')), '4');
    assert.deepEqual(
      (await javascript('for (;;) {}', true)).map((line) => (line.type === 'error' ? line.name : line.type)),
      ['KeyboardInterrupt'],
    );
    assert.deepEqual(
      (await javascript('await new Promise((resolve) => setTimeout(resolve, 60000))', true)).map((line) => (line.type === 'error' ? line.name : line.type)),
      ['KeyboardInterrupt'],
    );
    assert.equal(text(await javascript('kept')), '4');
  });

  it('java: JShell keeps declarations across cells, streams prints, and gives the last expression as the value', async () => {
    const run = await start('java');
    assert.deepEqual(streams(await run('int x = 20;\nSystem.out.print("a"); System.err.println("b");\nx * 2 + 2')), ['a', 'b\n', '42']);
    assert.deepEqual(
      (await run('int x = 20;')).map((line) => line.type),
      [],
    );
    assert.equal(text(await run('import java.util.*;\nList<String> names = new ArrayList<>(List.of("x"));\nnames.add("y");\nnames')), '[x, y]');
    assert.equal(text(await run('String greet(String who) { return "hi " + who; }\ngreet("you")')), '"hi you"');
    assert.equal(text(await run('System.getProperty("user.dir")')), JSON.stringify(process.cwd()));
  });

  it('java: a thrown exception and a cell that does not compile are error lines; the kernel goes on', async () => {
    const run = await start('java');
    const thrown = (await run('int y = 1;\ny / 0')).filter((line) => line.type === 'error');
    assert.deepEqual(
      thrown.map((line) => line.type === 'error' && [line.name, line.value]),
      [['java.lang.ArithmeticException', '/ by zero']],
    );
    const broken = (await run('int z = ;')).filter((line) => line.type === 'error');
    assert.equal(broken.length, 1);
    assert.equal(broken[0]!.type === 'error' && broken[0]!.name, 'CompilationException');
    assert.match(broken[0]!.type === 'error' ? broken[0]!.traceback : '', /int z = ;\n {8}\^/);
    assert.equal(text(await run('y + 1')), '2');
  });

  it("java: a run's env vars are system properties for that run only, as E2B's java kernel reads them; the sandbox's are too", async () => {
    const run = await start('java');
    assert.equal(text(await run('System.getProperty("HOME")')), JSON.stringify(process.env.HOME));
    assert.equal(text(await run('System.getProperty("FOO") + " " + System.getProperty("HOME")', false, { FOO: 'bar', HOME: '/elsewhere' })), '"bar /elsewhere"');
    assert.equal(text(await run('System.getProperty("FOO", "default") + " " + System.getProperty("HOME")')), `"default ${process.env.HOME}"`);
  });

  it('java: an interrupt stops a busy or sleeping cell, not the kernel', async () => {
    const run = await start('java');
    assert.equal(text(await run('int kept = 6;')), '');
    for (const cell of ['while (true) {}', 'Thread.sleep(60_000)', 'for (;;) { System.out.print(""); }']) {
      assert.deepEqual(
        (await run(cell, true)).map((line) => (line.type === 'error' ? line.name : line.type)),
        ['KeyboardInterrupt'],
        cell,
      );
    }
    assert.equal(text(await run('kept')), '6');
  });

  it('r: a cell keeps its state, prints visible values as R does, the last one the value; errors are error lines', async () => {
    const run = await start('r');
    assert.deepEqual(streams(await run('x <- 20\ncat("a\\n"); message("b")\n1\nx * 2 + 2')), ['a\n[1] 1\n', 'b\n', '[1] 42']);
    assert.equal(text(await run('invisible(x)')), '');
    assert.equal(text(await run('stop("boom")')), 'error:boom');
    assert.match(text(await run('x <- (')), /^error:<text>:2:0: unexpected end of input/);
    assert.equal(text(await run('c("é", x)')), '[1] "é"  "20"');
  });

  it("r: a run's env vars are set for that run only", async () => {
    const run = await start('r');
    assert.equal(text(await run('Sys.getenv("HOME")')), `[1] "${process.env.HOME}"`);
    assert.equal(text(await run('paste(Sys.getenv("FOO"), Sys.getenv("HOME"))', false, { FOO: 'bar', HOME: '/elsewhere' })), '[1] "bar /elsewhere"');
    assert.equal(text(await run('paste(Sys.getenv("FOO", unset = "default"), Sys.getenv("HOME"))')), `[1] "default ${process.env.HOME}"`);
  });

  it('r: an interrupt stops a busy or sleeping cell, not the kernel', async () => {
    const run = await start('r');
    assert.equal(text(await run('kept <- 6')), '');
    for (const cell of ['while (TRUE) {}', 'Sys.sleep(60)']) {
      assert.deepEqual(
        (await run(cell, true)).map((line) => (line.type === 'error' ? line.name : line.type)),
        ['KeyboardInterrupt'],
        cell,
      );
    }
    assert.equal(text(await run('kept')), '[1] 6');
  });

  it('javascript: cell after cell interrupted as it starts, each is stopped and the kernel kept', async () => {
    // Node had no handler for SIGINT for a moment before and after a cell's run: an interrupt that
    // came on the start report could land there and kill the kernel (a loaded host's CI run did).
    const javascript = await start('javascript');
    assert.equal(text(await javascript('globalThis.kept = 5')), '5');
    for (let cell = 0; cell < 150; cell++) {
      const names = (await javascript('for (;;) {}', true)).map((line) => (line.type === 'error' ? line.name : line.type));
      assert.deepEqual(names, ['KeyboardInterrupt'], `cell ${cell}`);
    }
    assert.equal(text(await javascript('kept')), '5');
  });
});

/**
 * How long a python kernel may take to come up: bounded by the CPU it uses and, far beyond, by
 * the wall clock (a wall clock alone failed a microVM's IPython on a loaded host). Run with the
 * bounds lowered (1 s of CPU, 2 s) and kernels that say they are up when told, never on time.
 */
describe("kernel-bridge.py's start bounds", () => {
  const scratch = mkdtempSync(join(tmpdir(), 'kernel-start-'));
  after(() => {
    stopGuests();
    rmSync(scratch, { recursive: true, force: true });
  });
  const bounded = (wallSeconds: number) =>
    source('bridge-kernels.py')
      .replace(/^KERNEL_START_CPU_SECONDS = .*$/m, 'KERNEL_START_CPU_SECONDS = 1.0')
      .replace(/^KERNEL_START_WALL_SECONDS = .*$/m, `KERNEL_START_WALL_SECONDS = ${wallSeconds}.0`);
  /** The bridge's first frame with `kernel` as its python kernel (argv: ... CONTROL_FD CELLS_FD). */
  async function readiness(kernel: string, wallSeconds: number): Promise<{ ready: boolean; error?: string }> {
    const bridge = startGuest([...bridgeArgv(bounded(wallSeconds)), 'python', source('charts.py'), source('startup.py'), kernel], {
      frameFd: 1,
      env: { ...process.env, TMPDIR: scratch },
    });
    const frame = (await bridge.next()) as { ready: boolean; error?: string };
    bridge.endInput();
    await bridge.exited;
    return frame;
  }
  const upWhen = (condition: string) => `import os, sys, time\nwhile not (${condition}):\n    pass\nos.write(int(sys.argv[-2]), b"up\\n")\ntime.sleep(600)`;

  it('a kernel that waits, using no CPU, comes up well past the CPU bound in wall time', async () => {
    // Idle for 3 s (past the 1 s of CPU, were it wall time), then up.
    const frame = await readiness(`import os, sys, time\ntime.sleep(3)\nos.write(int(sys.argv[-2]), b"up\\n")\ntime.sleep(600)`, 600);
    assert.equal(frame.ready, true, JSON.stringify(frame));
  });

  it('a kernel that burns CPU without coming up is given up at the CPU bound, saying so', async () => {
    const frame = await readiness(upWhen('False'), 600);
    assert.equal(frame.ready, false);
    assert.match(frame.error ?? '', /^RuntimeError: the kernel did not start: it used [1-9]\d*\.\d s of CPU in \d+ s \(bounds: 1 s of CPU, 600 s\)$/);
  });

  it('a kernel that waits forever is given up at the wall bound', async () => {
    const frame = await readiness('import time\ntime.sleep(600)', 2);
    assert.equal(frame.ready, false);
    assert.match(frame.error ?? '', /^RuntimeError: the kernel did not start: it used 0\.\d s of CPU in \d+ s \(bounds: 1 s of CPU, 2 s\)$/);
  });
});
