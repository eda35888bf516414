// The reporter of a test file's process started by scripts/test-file-process.mjs: each node:test
// event as one JSON line on fd 3, which nothing else writes to.
//
// Why not node's own run(): its children report as V8-serialized frames on their stdout, which
// everything the file starts with an inherited stdout shares, and Node 20's parent loses its place
// in that stream when a read ends right after a frame's length whose last byte is 0xFF (a full
// pipe on a busy machine splits a frame anywhere): "Unable to deserialize cloned data", thrown in
// the runner, which then died without its summary. test/integration/suite/test-runner.test.ts has
// such a file.
//
// fd 3 is one end of a socket pair (node's stdio 'pipe'), which /dev/fd cannot reopen
// close-on-exec: the file's children inherit it. Nothing writes to it but this reporter, though,
// and a child holding it open must not keep the runner waiting for its end: the last line says
// that the report is whole.
import { writeSync } from 'node:fs';

const EVENTS_FD = 3;
/** The line after the last event. */
export const END_LINE = '{"type":"report:end"}';
const pause = new Int32Array(new SharedArrayBuffer(4));

/** JSON for an event; errors (not JSON by themselves) as their fields, marked for the runner to revive. */
function encode(event) {
  const seen = new WeakSet();
  return JSON.stringify(event, (key, value) => {
    if (typeof value === 'bigint') return `${value}n`;
    if (value === null || typeof value !== 'object') return value;
    if (seen.has(value)) return '[circular]';
    seen.add(value);
    if (!(value instanceof Error)) return value;
    const fields = { ...value };
    return { ...fields, '@error': true, name: value.name, message: value.message, stack: value.stack, ...(value.cause === undefined ? {} : { cause: value.cause }) };
  });
}

/** Writes all of `line`, synchronously, so that nothing is lost when the process exits; waits while the runner's side is full. */
function writeLine(line) {
  const bytes = Buffer.from(`${line}\n`);
  for (let written = 0; written < bytes.length;) {
    try {
      written += writeSync(EVENTS_FD, bytes, written);
    } catch (error) {
      if (error.code !== 'EAGAIN') throw error;
      Atomics.wait(pause, 0, 0, 5);
    }
  }
}

// A reporter is a generator whose yields go to --test-reporter-destination; this one writes to its
// own fd instead, synchronously, so nothing is lost at exit, and yields nothing.
// eslint-disable-next-line require-yield
export default async function* testEvents(source) {
  for await (const event of source) writeLine(encode(event));
  writeLine(END_LINE);
}
