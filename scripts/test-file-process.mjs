// One test file in a process of its own, as node's run() starts it, but reporting over a channel
// of its own (scripts/test-events-reporter.mjs says why): its node:test events, its stdout and
// stderr as test:stdout and test:stderr, and what run() would say of the file itself: it failed if
// its process ended non-zero with no failed test to show for it (a leftover process, a crash), or
// if it ran past its deadline, when it is killed. Each such failure counts as one test, as in run().
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { END_LINE } from './test-events-reporter.mjs';

const REPORTER = fileURLToPath(new URL('./test-events-reporter.mjs', import.meta.url));
/** How long a file killed at its deadline has between SIGTERM and SIGKILL. */
const KILL_GRACE_MS = 5_000;
/** How long a file's output and an unfinished report may stay open after it exited (a child it left holds them). */
const OUTPUT_GRACE_MS = 2_000;

/** Yields the events of `file` run in a child node with this process's flags; kills it `deadlineMs` after its start. */
export async function* testFileEvents(file, deadlineMs) {
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  const args = [...process.execArgv, `--test-reporter=${REPORTER}`, '--test-reporter-destination=stdout', file];
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
  const started = performance.now();
  const queue = new EventQueue();
  let failedTests = 0;

  for (const [stream, type] of [
    [child.stdout, 'test:stdout'],
    [child.stderr, 'test:stderr'],
  ]) {
    stream.setEncoding('utf8');
    stream.on('data', (message) => queue.push({ type, data: { file, message } }));
  }
  const report = child.stdio[3];
  const lines = createInterface({ input: report, crlfDelay: Infinity });
  const reportEnded = new Promise((resolve) => {
    lines.once('close', resolve);
    lines.on('line', (line) => line === END_LINE && resolve());
  });
  lines.on('line', (line) => {
    if (line === END_LINE) return;
    const event = JSON.parse(line, reviveError);
    if (event.type === 'test:fail' && event.data.nesting === 0 && event.data.todo === undefined) failedTests++;
    queue.push(event);
  });

  let timedOut = false;
  const deadline = setTimeout(() => {
    timedOut = true;
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS).unref();
  }, deadlineMs);
  const ended = once(child, 'exit').then(async ([code, signal]) => {
    clearTimeout(deadline);
    const outputs = [child.stdout, child.stderr].map((stream) => stream.readableEnded || once(stream, 'end'));
    await Promise.race([Promise.all([reportEnded, ...outputs]), delay(OUTPUT_GRACE_MS)]);
    for (const stream of [report, child.stdout, child.stderr]) stream.destroy();
    const why = timedOut
      ? `ran past its deadline of ${deadlineMs / 1000} s and was killed`
      : code !== 0 && failedTests === 0
        ? `ended with ${signal ?? `exit code ${code}`} (its output above says why)`
        : undefined;
    if (why) {
      const error = Object.assign(new Error(`${file} ${why}`), { failureType: timedOut ? 'testTimeoutFailure' : 'testCodeFailure' });
      const details = { duration_ms: performance.now() - started, error };
      queue.push({ type: 'test:fail', data: { name: file, nesting: 0, file, line: 1, column: 1, testNumber: 0, details } });
      for (const message of ['tests 1', 'fail 1']) queue.push({ type: 'test:diagnostic', data: { nesting: 0, message } });
    }
    queue.end();
  });
  child.once('error', (error) => queue.fail(error));

  yield* queue;
  await ended;
}

/** JSON.parse's reviver for what scripts/test-events-reporter.mjs wrote of an error. */
function reviveError(key, value) {
  if (value === null || typeof value !== 'object' || value['@error'] !== true) return value;
  const { '@error': _, name, message, stack, ...fields } = value;
  const error = Object.assign(new Error(message), fields);
  if (name !== 'Error') Object.defineProperty(error, 'name', { value: name, enumerable: false, configurable: true, writable: true });
  error.stack = stack;
  return error;
}

const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref());

/** Events pushed by callbacks, taken by one for-await. */
class EventQueue {
  #items = [];
  #wake = () => undefined;
  #done = false;
  #error = undefined;

  push(item) {
    this.#items.push(item);
    this.#wake();
  }
  end() {
    this.#done = true;
    this.#wake();
  }
  fail(error) {
    this.#error = error;
    this.end();
  }
  async *[Symbol.asyncIterator]() {
    for (;;) {
      while (this.#items.length > 0) yield this.#items.shift();
      if (this.#error) throw this.#error;
      if (this.#done) return;
      await new Promise((resolve) => (this.#wake = resolve));
    }
  }
}
