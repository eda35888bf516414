// Runs test files with node's own test runner, in the order given. `node --test FILES` sorts its
// files by name before it starts them; this starts them as listed (scripts/run-tests.sh puts the
// slowest first), with the spec reporter and the file-times summary on stdout.
// Run as `node [FLAGS] scripts/run-test-files.mjs CONCURRENCY FILE_TIMEOUT_MS FILE...`: each
// file's process gets this process's flags (--enable-source-maps for the built files that
// scripts/run-tests.sh runs, --import tsx for TypeScript).
import { PassThrough } from 'node:stream';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import fileTimes from './file-times-reporter.mjs';

const [concurrency, timeout, ...files] = process.argv.slice(2);
if (!(Number(concurrency) > 0) || !(Number(timeout) > 0) || files.length === 0) {
  console.error('usage: node [FLAGS] scripts/run-test-files.mjs CONCURRENCY FILE_TIMEOUT_MS FILE...');
  process.exit(2);
}

const events = run({ files, concurrency: Number(concurrency), timeout: Number(timeout) });
// As `node --test` does: any failure that is not a todo fails the run (a file killed at its
// deadline is reported as a failed test too).
events.on('test:fail', (test) => {
  if (test.todo === undefined) process.exitCode = 1;
});
for (const reporter of [new spec(), fileTimes]) {
  const copy = new PassThrough({ objectMode: true });
  events.pipe(copy);
  copy.compose(reporter).pipe(process.stdout, { end: false });
}
