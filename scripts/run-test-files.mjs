// Runs test files with node's own test runner, in the order given. `node --test FILES` sorts its
// files by name before it starts them; this starts them as listed (scripts/run-tests.sh puts the
// slowest first), with the spec reporter and the file-times summary on stdout.
// Run as `node [FLAGS] scripts/run-test-files.mjs CONCURRENCY FILE_TIMEOUT_MS FILE... [--heavy FILE...]`:
// each file's process gets this process's flags (--enable-source-maps for the built files that
// scripts/run-tests.sh runs, --import tsx for TypeScript).
//
// Two lanes share the run: the heavy files (those that boot microVMs by the dozen) one at a time,
// each once it holds a machine-wide heavy slot (scripts/machine-slots.mjs), and the others
// CONCURRENCY - 1 at a time beside them (CONCURRENCY when there are no heavy files). A file's deadline starts when the file does, never while
// it waits for its slot. The lanes' events are one stream, so the reporters see one run, and one
// summary closes it.
import { PassThrough } from 'node:stream';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import fileTimes from './file-times-reporter.mjs';
import { takeHeavySlot } from './machine-slots.mjs';

const [concurrency, timeout, ...rest] = process.argv.slice(2);
const split = rest.indexOf('--heavy');
const light = split === -1 ? rest : rest.slice(0, split);
const heavy = split === -1 ? [] : rest.slice(split + 1);
if (!(Number(concurrency) > 0) || !(Number(timeout) > 0) || light.length + heavy.length === 0) {
  console.error('usage: node [FLAGS] scripts/run-test-files.mjs CONCURRENCY FILE_TIMEOUT_MS FILE... [--heavy FILE...]');
  process.exit(2);
}

/** The counts each run() closes with as diagnostics; summed over the lanes' runs into one summary. */
const SUMMARY = /^(tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) (\d+(?:\.\d+)?)$/;
const totals = new Map();
const started = performance.now();

const events = new PassThrough({ objectMode: true });
for (const reporter of [new spec(), fileTimes]) {
  const copy = new PassThrough({ objectMode: true });
  events.pipe(copy);
  copy.compose(reporter).pipe(process.stdout, { end: false });
}

/** Feeds one run()'s events into the shared stream, keeping its closing counts for the summary. */
async function forward(files, fileConcurrency) {
  for await (const event of run({ files, concurrency: fileConcurrency, timeout: Number(timeout) })) {
    const counted = event.type === 'test:diagnostic' && event.data.nesting === 0 ? SUMMARY.exec(event.data.message) : null;
    if (counted) {
      totals.set(counted[1], (totals.get(counted[1]) ?? 0) + Number(counted[2]));
      continue;
    }
    // As `node --test` does: any failure that is not a todo fails the run (a file killed at its
    // deadline is reported as a failed test too).
    if (event.type === 'test:fail' && event.data.todo === undefined) process.exitCode = 1;
    events.write(event);
  }
}

async function heavyLane() {
  for (const file of heavy) {
    const release = await takeHeavySlot();
    try {
      await forward([file], 1);
    } finally {
      release();
    }
  }
}

const lightConcurrency = heavy.length > 0 ? Math.max(1, Number(concurrency) - 1) : Number(concurrency);
await Promise.all([light.length > 0 ? forward(light, lightConcurrency) : undefined, heavyLane()]);
totals.set('duration_ms', performance.now() - started);
for (const [name, value] of totals) events.write({ type: 'test:diagnostic', data: { nesting: 0, message: `${name} ${value}` } });
events.end();
