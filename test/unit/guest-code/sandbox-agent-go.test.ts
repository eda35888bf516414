import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

/**
 * The sandbox agent's own Go tests (src/sandboxes/agent/*_test.go: its JSON, paths, entries,
 * failures and framing, held to python's answers and to the contract), run by `go test -json` in
 * the environment of the agent's build (scripts/go-agent.sh), each reported here as a test of its
 * own, so that the suite's summary counts them. The agent as a whole, over its pipes, is
 * test/integration/guest-code/sandbox-agent.test.ts.
 */
const GO_AGENT = fileURLToPath(new URL('../../../scripts/go-agent.sh', import.meta.url));

type Outcome = 'pass' | 'fail' | 'skip';
/** One line of `go test -json` (test2json): a subtest's Test is `Parent/child`. */
interface GoTestEvent {
  Action: string;
  Test?: string;
  Output?: string;
}
interface GoRun {
  exitCode: number | null;
  /** Each top-level test's outcome and output (its subtests' included), in the order they ran. */
  tests: Map<string, { outcome?: Outcome; output: string }>;
  /** What was said outside any test: the package's summary, a build failure, go's own errors. */
  output: string;
}

function runGoTests(): Promise<GoRun> {
  return new Promise((resolve) => {
    const run: GoRun = { exitCode: null, tests: new Map(), output: '' };
    const child = spawn('bash', [GO_AGENT, 'test', '-json', '-timeout', '120s', './...'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let pending = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (pending + chunk).split('\n');
      pending = lines.pop()!;
      for (const line of lines) take(run, line);
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (run.output += chunk));
    child.on('error', (error) => (run.output += `${error.message}\n`));
    child.on('close', (code) => {
      take(run, pending);
      run.exitCode = code;
      resolve(run);
    });
  });
}

function take(run: GoRun, line: string): void {
  if (line.trim() === '') return;
  let event: GoTestEvent;
  try {
    event = JSON.parse(line) as GoTestEvent;
  } catch {
    run.output += `${line}\n`;
    return;
  }
  if (event.Test === undefined) {
    run.output += event.Output ?? '';
    return;
  }
  const name = event.Test.split('/')[0]!;
  const test = run.tests.get(name) ?? { output: '' };
  run.tests.set(name, test);
  test.output += event.Output ?? '';
  if (event.Test === name && (event.Action === 'pass' || event.Action === 'fail' || event.Action === 'skip')) test.outcome = event.Action;
}

// Started as this file is loaded: compiling the test program takes some seconds on a cold cache,
// spent beside the unit tests that run before these; with nothing changed go answers from its
// cache at once.
const goRun = runGoTests();

describe("the sandbox agent's Go unit tests", () => {
  it('pass, each one (go test -json)', async (t) => {
    const { exitCode, tests, output } = await goRun;
    assert.ok(tests.size > 0, `go test ran no test (exit ${exitCode}):\n${output}`);
    for (const [name, test] of tests) {
      await t.test(name, { skip: test.outcome === 'skip' }, () => assert.equal(test.outcome, 'pass', test.output));
    }
    assert.equal(exitCode, 0, output);
  });
});
