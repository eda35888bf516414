/**
 * A node that starts before its program is known and waits for it on stdin, as waiting-python.py
 * does: a snippet's job (src/runner/snippet.ts), run as `node -e WAITING` (node.ts) in a sandbox
 * pre-started for the language, its stdin the job's pipe from the host: one JSON line
 * `{"source", "bytes", "args"}`, the program's bytes, then the program's own stdin (read here
 * byte-exact with readSync, so none of it is taken). The program then runs as `node PATH ARGS...` would, through node's own entry
 * point (`Module.runMain`): CommonJS or ES module by the same detection, `require.main`,
 * top-level await, and uncaught errors printed by node itself.
 */
// Node makes its stdio streams on first use, which costs a program's console.log as much as
// the rest of its run: made here, while the interpreter waits, they are part of its start-up.
void process.stdout;
void process.stderr;
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');
function readExact(count) {
  const buffer = Buffer.alloc(count);
  let offset = 0;
  while (offset < count) {
    let read;
    try {
      read = fs.readSync(0, buffer, offset, count - offset, null);
    } catch (error) {
      if (error.code === 'EAGAIN') continue;
      throw error;
    }
    if (read === 0) process.exit(70);
    offset += read;
  }
  return buffer;
}
let line = '';
for (;;) {
  const byte = readExact(1).toString('latin1');
  if (byte === '\n') break;
  line += byte;
}
const header = JSON.parse(line);
const source = readExact(header.bytes);
fs.mkdirSync(path.dirname(header.source), { recursive: true });
process.chdir(path.dirname(header.source));
fs.writeFileSync(header.source, source);
process.argv.splice(1, process.argv.length, header.source, ...header.args);
Module.runMain(header.source);
