// Runs test files, each in a node process of its own as node's own runner does
// (scripts/test-file-process.mjs, which says why not with node's run()), in the order given.
// `node --test FILES` sorts its files by name before it starts them; this starts them as listed
// (scripts/run-tests.sh puts the slowest first), with the spec reporter and the file-times summary
// on stdout.
// Run as `node [FLAGS] scripts/run-test-files.mjs CONCURRENCY FILE_TIMEOUT_MS FILE... [--heavy FILE...]`:
// each file's process gets this process's flags (--enable-source-maps for the built files that
// scripts/run-tests.sh runs, --import tsx for TypeScript).
//
// CONCURRENCY files run at a time, each once it holds one of the machine's CONCURRENCY file slots
// (scripts/machine-slots.mjs: shared with any other run of the suite on this machine). Two lanes
// share them: the heavy files (those that boot microVMs by the dozen) one at a time, each also
// holding a machine-wide heavy slot, then light ones; and the others beside them, in order. A file's deadline
// starts when the file does, never while it waits for its slots. The files' events are one stream,
// so the reporters see one run, and one summary closes it.
import { appendFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { spec } from 'node:test/reporters';
import fileTimes from './file-times-reporter.mjs';
import { HEAVY_SLOTS, takeSlot } from './machine-slots.mjs';
import { testFileEvents } from './test-file-process.mjs';

const [concurrency, timeout, ...rest] = process.argv.slice(2);
const split = rest.indexOf('--heavy');
const light = split === -1 ? rest : rest.slice(0, split);
const heavy = split === -1 ? [] : rest.slice(split + 1);
if (!(Number(concurrency) > 0) || !(Number(timeout) > 0) || light.length + heavy.length === 0) {
  console.error('usage: node [FLAGS] scripts/run-test-files.mjs CONCURRENCY FILE_TIMEOUT_MS FILE... [--heavy FILE...]');
  process.exit(2);
}

/** The counts each file's run closes with as diagnostics; summed over the files into one summary. */
const SUMMARY = /^(tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) (\d+(?:\.\d+)?)$/;
const totals = new Map();
const started = performance.now();

const events = new PassThrough({ objectMode: true });
for (const reporter of [new spec(), fileTimes]) {
  const copy = new PassThrough({ objectMode: true });
  events.pipe(copy);
  copy.compose(reporter).pipe(process.stdout, { end: false });
}

/** AGENT_RUNNER_TEST_TIMELINE=FILE: one line per test file appended to FILE, `heavy|light START_S END_S FILE` from the run's start, to see what bounds a run. */
const timeline = process.env.AGENT_RUNNER_TEST_TIMELINE;
const sinceStart = () => ((performance.now() - started) / 1000).toFixed(1);

/** Runs one file once it holds its slots, feeding its events into the shared stream and keeping its closing counts for the summary. */
async function runFile(file, heavy) {
  const releaseHeavy = heavy ? await takeSlot('heavy', HEAVY_SLOTS) : undefined;
  const releaseFile = await takeSlot('file', Number(concurrency));
  const fileStarted = sinceStart();
  // A file's top-level test goes to the reporters whole, written at once: the events of files
  // running at the same time would otherwise interleave within it, and the spec reporter, which
  // pairs each test's end with the last start it saw, stops the run on that.
  let batch = [];
  // The file's own counts, and its top-level tests that failed: node counts a suite whose after
  // hook failed as failed (its test:fail) yet leaves it out of the file's `fail` count.
  const counts = new Map();
  let failedTopLevel = 0;
  const flush = () => {
    for (const event of batch) events.write(event);
    batch = [];
  };
  try {
    for await (const event of testFileEvents(file, Number(timeout))) {
      const counted = event.type === 'test:diagnostic' && event.data.nesting === 0 ? SUMMARY.exec(event.data.message) : null;
      if (counted) {
        counts.set(counted[1], (counts.get(counted[1]) ?? 0) + Number(counted[2]));
        continue;
      }
      // As `node --test` does: any failure that is not a todo fails the run (a file killed at its
      // deadline is reported as a failed test too).
      if (event.type === 'test:fail' && event.data.todo === undefined) {
        process.exitCode = 1;
        if (event.data.nesting === 0) failedTopLevel++;
      }
      batch.push(event);
      if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0) flush();
    }
  } finally {
    flush();
    counts.set('fail', Math.max(counts.get('fail') ?? 0, failedTopLevel));
    for (const [name, value] of counts) totals.set(name, (totals.get(name) ?? 0) + value);
    releaseFile();
    releaseHeavy?.();
    if (timeline) appendFileSync(timeline, `${heavy ? 'heavy' : 'light'} ${fileStarted} ${sinceStart()} ${file}\n`);
  }
}

// Light files are taken in order by the light workers and, once the heavy files are done, by the
// heavy lane's worker too: its file slot does not stand idle while light files wait.
const lightQueue = [...light];
const heavyQueue = [...heavy];
async function lightWorker() {
  for (let file = lightQueue.shift(); file !== undefined; file = lightQueue.shift()) await runFile(file, false);
}
async function heavyWorker() {
  for (let file = heavyQueue.shift(); file !== undefined; file = heavyQueue.shift()) await runFile(file, true);
  await lightWorker();
}

const lightWorkers = heavy.length > 0 ? Math.max(1, Number(concurrency) - 1) : Number(concurrency);
await Promise.all([...Array.from({ length: lightWorkers }, lightWorker), ...(heavy.length > 0 ? [heavyWorker()] : [])]);
totals.set('duration_ms', performance.now() - started);
for (const [name, value] of totals) events.write({ type: 'test:diagnostic', data: { nesting: 0, message: `${name} ${value}` } });
events.end();
