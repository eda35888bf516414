// A node:test reporter that closes a run with its slowest test files, so each run says where its
// minutes went, ranked by the sum of each file's top-level tests and suites (their hooks included).
// Beside it, the wall time from the file's first test start to its last test end as the runner saw
// them: with one process per file (integration) that adds file-level hooks; in the one-process unit
// set, where files interleave, it means little.
// Used beside the spec reporter by scripts/run-tests.sh.
import { relative } from 'node:path';

const SHOWN = 10;
const LINGER_MS = 5_000;

/** A file scripts/build-tests.mjs built (.test-build/run-PID/a/b.test.js) by its source's name (test/a/b.test.ts). */
const sourceOf = (file) => file.replace(/^\.test-build\/run-\d+\/(.*)\.js$/, 'test/$1.ts');

export default async function* fileTimes(source) {
  const files = new Map();
  for await (const event of source) {
    const file = event.data?.file;
    if (!file || !['test:start', 'test:pass', 'test:fail'].includes(event.type)) continue;
    const now = performance.now();
    const seen = files.get(file) ?? { first: now, last: now, tests: 0 };
    seen.last = now;
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0) {
      seen.tests += event.data.details?.duration_ms ?? 0;
    }
    files.set(file, seen);
  }
  const slowest = [...files].map(([file, seen]) => ({ file, wall: seen.last - seen.first, tests: seen.tests })).sort((a, b) => b.tests - a.tests);
  const seconds = (ms) => (ms / 1000).toFixed(1).padStart(7);
  yield `\n# slowest ${Math.min(SHOWN, slowest.length)} of ${slowest.length} test files (top-level tests s, wall s)\n`;
  for (const { file, wall, tests } of slowest.slice(0, SHOWN)) yield `#${seconds(tests)} ${seconds(wall)}  ${sourceOf(relative(process.cwd(), file))}\n`;
  // The run is over. A file the runner killed at its deadline can leave a process that holds
  // the runner's pipe from it open, and with it the runner itself, after the summary: give the
  // reporters a moment to flush, then end with the exit code the runner set (1 on any failure).
  setTimeout(() => process.exit(), LINGER_MS).unref();
}
