/**
 * A session's node, as session-python.py describes for python: started as
 * `node -e KERNEL WORK_DIR` (node.ts) by the launcher, frames on fds 3 and 4, fds 1 and 2 files
 * read back after each cell. A cell runs in the kernel's global context
 * (`vm.runInThisContext`), so globals and top-level declarations persist; `require` resolves
 * from the work dir. A timeout interrupts synchronous code (vm's own timeout) and abandons a
 * cell's promise; either way the context stays. A cell with top-level `await` runs as an async
 * function, so its own declarations stay in it (assign to globalThis to keep them). Between
 * requests the event loop runs: timers and servers a cell started go on.
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const util = require('node:util');
const vm = require('node:vm');
const { createRequire } = require('node:module');
const childProcess = require('node:child_process');

const work = process.argv[1];
// The launcher (session/kernel-launcher.ts) left the protocol on fds 3 and 4, and fds 1 and 2
// on the capture files a cell's output (its children's too) is read back from.
const protoIn = 3;
const protoOut = 4;
const readers = { stdout: fs.openSync('/tmp/.session/stdout', 'r'), stderr: fs.openSync('/tmp/.session/stderr', 'r') };
process.chdir(work);
// A cell's write past RLIMIT_FSIZE fails in that write, not by killing the session.
process.on('SIGXFSZ', () => undefined);
// What a cell leaves running may throw later: it is reported in the next cell's stderr.
process.on('uncaughtException', (error) => process.stderr.write('Uncaught ' + util.inspect(error) + '\n'));
process.on('unhandledRejection', (reason) => process.stderr.write('Unhandled rejection: ' + util.inspect(reason) + '\n'));

globalThis.require = createRequire(path.join(work, 'cell.js'));
globalThis.module = { exports: {} };
globalThis.__dirname = work;

function send(message) {
  const payload = Buffer.from(JSON.stringify(message));
  const frame = Buffer.alloc(4 + payload.length);
  frame.writeUInt32BE(payload.length, 0);
  payload.copy(frame, 4);
  let offset = 0;
  while (offset < frame.length) {
    try {
      offset += fs.writeSync(protoOut, frame, offset);
    } catch (error) {
      if (error.code !== 'EAGAIN') throw error;
    }
  }
}

function captured(limit) {
  const out = {};
  for (const [name, fd] of Object.entries({ stdout: 1, stderr: 2 })) {
    const size = fs.fstatSync(fd).size;
    const buffer = Buffer.alloc(Math.min(size, limit));
    fs.readSync(readers[name], buffer, 0, buffer.length, 0);
    out[name] = buffer.toString('utf8');
    out[name + '_bytes'] = size;
    fs.ftruncateSync(fd, 0);
  }
  return out;
}

/**
 * At most `limit` bytes of UTF-8 (whole characters), and the size it had: the host keeps no
 * more, and a reply that outgrew the channel's frame maximum would end the session.
 */
function cut(text, limit) {
  const data = Buffer.from(text);
  if (data.length <= limit) return [text, data.length];
  let end = limit;
  while (end > 0 && (data[end] & 0xc0) === 0x80) end -= 1;
  return [data.subarray(0, end).toString(), data.length];
}

let cells = 0;
/** The error as node prints it, less the kernel's own frames (from where it ran the cell on). */
function cellStack(error) {
  if (!(error instanceof Error) || typeof error.stack !== 'string') return 'Uncaught ' + util.inspect(error);
  const lines = error.stack.split('\n');
  const ours = lines.findIndex((line) => /^ {4}at (Script\.runInThisContext|new Script) /.test(line));
  return (ours === -1 ? lines : lines.slice(0, ours)).join('\n');
}
function errorText(error) {
  return error instanceof Error ? error.name + ': ' + error.message : 'Uncaught ' + util.inspect(error);
}

async function cell(request) {
  cells += 1;
  const filename = '<cell ' + cells + '>';
  const reply = { status: 'ok', error: null, value: null, exit_code: 0 };
  const started = Date.now();
  try {
    let script;
    try {
      script = new vm.Script(request.code, { filename });
    } catch (error) {
      // Top-level await: the cell runs as an async function (its declarations stay in it).
      if (!(error instanceof SyntaxError) || !/await/.test(error.message)) throw error;
      script = new vm.Script('(async () => {\n' + request.code + '\n})()', { filename, lineOffset: -1 });
    }
    let value = script.runInThisContext({ timeout: request.timeout_ms, breakOnSigint: false });
    if (value instanceof Promise) {
      const left = Math.max(0, request.timeout_ms - (Date.now() - started));
      let timer;
      const expired = Symbol('expired');
      const deadline = new Promise((resolve) => (timer = setTimeout(resolve, left, expired)));
      value = await Promise.race([value, deadline]);
      clearTimeout(timer);
      if (value === expired) {
        reply.status = 'timed_out';
        reply.exit_code = 124;
        reply.error = "the cell's promise did not settle within its timeout; it was abandoned (what it started may still run)";
        process.stderr.write(reply.error + '\n');
        value = undefined;
      }
    }
    if (value !== undefined) reply.value = util.inspect(value);
  } catch (error) {
    if (error && error.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') {
      Object.assign(reply, { status: 'timed_out', exit_code: 124, error: 'the cell ran past its timeout and was interrupted' });
      process.stderr.write(reply.error + '\n');
    } else {
      Object.assign(reply, { status: 'error', exit_code: 1, error: errorText(error) });
      process.stderr.write(cellStack(error) + '\n');
    }
  }
  for (const field of ['value', 'error']) {
    if (reply[field] !== null) [reply[field], reply[field + '_bytes']] = cut(reply[field], request.output_bytes);
  }
  return Object.assign(reply, captured(request.output_bytes));
}

function command(request) {
  return new Promise((resolve) => {
    const reply = { status: 'ok', exit_code: 0, error: null, value: null };
    const kept = { stdout: [], stderr: [] };
    const counted = { stdout: 0, stderr: 0 };
    // Its own process group, so a timeout takes what it started too.
    const child = childProcess.spawn(request.argv[0], request.argv.slice(1), { cwd: work, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // The group has ended already: nothing is left to kill.
      }
    }, request.timeout_ms);
    for (const name of ['stdout', 'stderr']) {
      child[name].on('data', (chunk) => {
        const room = request.output_bytes - counted[name];
        if (room > 0) kept[name].push(chunk.subarray(0, room));
        counted[name] += chunk.length;
      });
    }
    child.stdin.on('error', () => undefined);
    child.stdin.end(request.stdin ?? '');
    child.on('error', (error) => {
      clearTimeout(timer);
      resolve(
        Object.assign(reply, {
          status: 'error',
          exit_code: error.code === 'ENOENT' ? 127 : 126,
          error: request.argv[0] + ': ' + error.message,
          stdout: '',
          stderr: '',
          stdout_bytes: 0,
          stderr_bytes: 0,
        }),
      );
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      reply.exit_code = timedOut ? 124 : (code ?? 128 + (require('node:os').constants.signals[signal] ?? 0));
      reply.status = timedOut ? 'timed_out' : reply.exit_code === 0 ? 'ok' : 'error';
      for (const name of ['stdout', 'stderr']) {
        reply[name] = Buffer.concat(kept[name]).toString('utf8');
        reply[name + '_bytes'] = counted[name];
      }
      resolve(reply);
    });
  });
}

function inside(relative) {
  const full = path.resolve(work, relative);
  let real;
  try {
    real = fs.realpathSync(full);
  } catch {
    real = path.join(fs.realpathSync(path.dirname(full)), path.basename(full));
  }
  if (real !== work && !real.startsWith(work + '/')) throw Object.assign(new Error(relative + ' leaves the work dir'), { code: 'EACCES' });
  return real;
}

// Only regular files are served. Opened O_NONBLOCK, and refused by what fstat says: a FIFO a
// cell made would otherwise hold the kernel until something wrote to it.
function notRegular(request) {
  return { error: { code: 'not_a_file', message: request.path + ' is not a regular file (a directory, FIFO, socket or device): only regular files are read and written' } };
}

function writeFile(request) {
  const full = path.resolve(work, request.path);
  fs.mkdirSync(path.dirname(full), { recursive: true });
  const target = inside(request.path);
  const data = Buffer.from(request.data, 'base64');
  const { O_WRONLY, O_CREAT, O_TRUNC, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  let fd;
  try {
    fd = fs.openSync(target, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK, request.mode ?? 0o644);
  } catch (error) {
    // A FIFO nobody reads, or a socket.
    if (error.code === 'ENXIO') return notRegular(request);
    throw error;
  }
  try {
    if (!fs.fstatSync(fd).isFile()) return notRegular(request);
    fs.writeFileSync(fd, data);
  } finally {
    fs.closeSync(fd);
  }
  return { bytes: data.length };
}

function readFile(request) {
  const fd = fs.openSync(inside(request.path), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  try {
    const info = fs.fstatSync(fd);
    if (!info.isFile()) return notRegular(request);
    if (info.size > request.max_bytes) return { error: { code: 'too_large', message: request.path + ' has ' + info.size + ' bytes, over the limit of ' + request.max_bytes } };
    return { data: fs.readFileSync(fd).toString('base64') };
  } finally {
    fs.closeSync(fd);
  }
}

const operations = { cell, command, write: writeFile, read: readFile };
async function answer(request) {
  let reply;
  try {
    reply = await operations[request.op](request);
  } catch (error) {
    reply = { error: { code: error.code === 'ENOENT' ? 'not_found' : 'os_error', message: error.code === 'ENOENT' ? request.path + ' does not exist' : String(error.message) } };
  }
  reply.id = request.id;
  send(reply);
}

// Requests come one at a time; the event loop runs between them, so what a cell started goes on.
let pending = Buffer.alloc(0);
let queue = Promise.resolve();
const input = fs.createReadStream('', { fd: protoIn });
input.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  while (pending.length >= 4 && pending.length >= 4 + pending.readUInt32BE(0)) {
    const length = pending.readUInt32BE(0);
    const request = JSON.parse(pending.subarray(4, 4 + length).toString('utf8'));
    pending = pending.subarray(4 + length);
    queue = queue.then(() => answer(request));
  }
});
input.on('end', () => process.exit(0));
send({ ready: true, version: process.versions.node });
