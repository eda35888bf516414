/**
 * The node side of a code task, staged read-only into the sandbox by src/tasks/launch.ts and run
 * as `node task-harness.cjs <code file> <input file>` with fd 3 as the result pipe:
 * each kept console.log() call as it is made, then one message. The code can write to fd 3
 * too, so the parent checks all of it (result-channel.ts): this side only has to keep to the
 * protocol. CommonJS, so the code can be handed `require`.
 */
'use strict';
const fs = require('node:fs');
const util = require('node:util');
const vm = require('node:vm');

const RESULT_FD = 3;
/**
 * Dropped console.log() calls are counted to the parent one by one up to EXACT_DROPS, so a kill
 * loses none of them; past it, a loop of calls would spend its time on the pipe: they are
 * counted at most every DROPPED_EVERY_MS (and before the message).
 */
const EXACT_DROPS = 1000;
const DROPPED_EVERY_MS = 50;

class ResultError extends Error {}
ResultError.prototype.name = 'ResultError';

/** JSON, with what it cannot carry (BigInt, Map, Set, symbols, functions) as strings. */
function toJson(value) {
  return JSON.stringify(value, (key, entry) => {
    if (typeof entry === 'bigint') return entry.toString();
    if (typeof entry === 'symbol' || typeof entry === 'function' || entry instanceof Map || entry instanceof Set) return util.inspect(entry);
    return entry;
  });
}

function writeFrame(payload) {
  const frame = Buffer.alloc(4 + payload.length);
  frame.writeUInt32BE(payload.length, 0);
  payload.copy(frame, 4);
  for (let offset = 0; offset < frame.length;) offset += fs.writeSync(RESULT_FD, frame, offset);
}

/**
 * console.log() calls as lists of formatted arguments: the first maxCalls, up to maxBytes of
 * JSON. Each kept call goes to the parent as it is made ({"print": [...]}) and dropped ones are
 * counted there ({"dropped": n}), so a kill loses none; the parent keeps its own list by the
 * same rule, and the message's print_args must equal it. Nothing is sent after the message.
 */
class Prints {
  constructor(maxCalls, maxBytes) {
    this.maxCalls = maxCalls;
    this.maxBytes = maxBytes;
    this.kept = [];
    this.keptBytes = 0;
    this.dropped = 0;
    this.unsentDrops = 0;
    this.dropsSentAt = 0;
    this.closed = false;
  }

  record(args) {
    if (this.closed) return;
    // Once calls are dropped, every later one is: no need to format it.
    if (this.dropped === 0) {
      // Each argument as node shows a value, strings quoted too, as the protocol shows python's repr().
      const formatted = args.map((arg) => util.inspect(arg));
      const encoded = JSON.stringify(formatted);
      const size = Buffer.byteLength(encoded);
      if (this.dropped === 0 && this.kept.length < this.maxCalls && this.keptBytes + size <= this.maxBytes) {
        this.kept.push(formatted);
        this.keptBytes += size;
        writeFrame(Buffer.from('{"print":' + encoded + '}'));
        return;
      }
    }
    this.dropped += 1;
    this.unsentDrops += 1;
    if (this.dropped <= EXACT_DROPS || Date.now() - this.dropsSentAt >= DROPPED_EVERY_MS) this.sendDrops();
  }

  sendDrops() {
    if (this.unsentDrops === 0) return;
    writeFrame(Buffer.from('{"dropped":' + this.unsentDrops + '}'));
    this.unsentDrops = 0;
    this.dropsSentAt = Date.now();
  }

  /** The message is next: later calls (an exit listener's) are not the task's. */
  close() {
    this.sendDrops();
    this.closed = true;
  }

  list() {
    if (this.dropped === 0) return this.kept;
    const calls = this.dropped === 1 ? 'call' : 'calls';
    const note = '[' + this.dropped + ' more console.log() ' + calls + ' dropped: print_args keeps the first ' + this.maxCalls + ' calls, up to ' + this.maxBytes + ' bytes]';
    return [...this.kept, [note]];
  }
}

/** The code is a function body; the wrapper takes line 0, so stacks point at the code's own lines. */
function compileTask(codePath, parameter) {
  const source = '(async function (' + parameter + ', require) {\n' + fs.readFileSync(codePath, 'utf8') + '\n})';
  const options = { filename: codePath, lineOffset: -1, importModuleDynamically: vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER };
  return new vm.Script(source, options).runInThisContext();
}

function typeName(value) {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'an array' : typeof value;
}

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function asItem(value, where) {
  if (!isObject(value)) throw new ResultError(where + ' is ' + typeName(value) + ', not an object');
  if (!('json' in value)) return { json: value };
  if (!isObject(value.json)) throw new ResultError(where + '.json is ' + typeName(value.json) + ', not an object');
  return value;
}

async function run(task, codePath) {
  if (task.mode === 'per_item') {
    const taskFunction = compileTask(codePath, 'item');
    const result = [];
    for (const [index, item] of task.items.entries()) {
      const value = await taskFunction(item, require);
      if (value !== undefined && value !== null) result.push({ ...asItem(value, 'the value returned for item ' + index), pairedItem: { item: index } });
    }
    return result;
  }
  const value = await compileTask(codePath, 'items')(task.items, require);
  const values = isObject(value) ? [value] : value;
  if (!Array.isArray(values)) throw new ResultError('the code returned ' + typeName(value) + ': return an array of items (or one object)');
  return values.map((entry, index) => asItem(entry, 'result[' + index + ']'));
}

function resultMessage(result, prints, maxResultBytes) {
  let json;
  try {
    json = toJson(result);
  } catch (error) {
    throw new ResultError('the result cannot be converted to JSON: ' + error.message);
  }
  const size = Buffer.byteLength(json);
  if (size > maxResultBytes) throw new ResultError('the result is ' + size + ' bytes of JSON, over max_result_bytes (' + maxResultBytes + ')');
  return Buffer.from('{"result":' + json + ',"print_args":' + JSON.stringify(prints.list()) + '}');
}

function errorMessage(error, prints) {
  const info =
    error instanceof Error
      ? { message: String(error.message), description: String(error.name), stack: String(error.stack ?? '') }
      : { message: util.inspect(error), description: typeName(error), stack: '' };
  return Buffer.from(toJson({ error: { ...info, stderr: '' }, print_args: prints.list() }));
}

function exitError(code) {
  const error = new Error('the code exited with code ' + code + ' (process.exit, or a promise that never settles) instead of returning its items');
  error.name = 'process.exit';
  return error;
}

let sent = false;

/** The one message; the process then exits 0 (a non-zero exit after it is a crash). */
function send(payload, prints) {
  if (sent) return;
  sent = true;
  prints.close();
  writeFrame(payload);
}

async function main() {
  const [codePath, inputPath] = process.argv.slice(2);
  const task = JSON.parse(fs.readFileSync(inputPath, 'utf8'));
  const prints = new Prints(task.max_print_calls, task.max_print_bytes);
  for (const name of ['log', 'info', 'debug']) console[name] = (...args) => prints.record(args);
  process.on('exit', (code) => {
    send(errorMessage(exitError(code), prints), prints);
    // process.exit(3) is reported in the message: the process itself ends well.
    process.exitCode = 0;
  });
  process.on('uncaughtException', (error) => {
    send(errorMessage(error, prints), prints);
    process.exit(0);
  });
  let payload;
  try {
    payload = resultMessage(await run(task, codePath), prints, task.max_result_bytes);
  } catch (error) {
    payload = errorMessage(error, prints);
  }
  send(payload, prints);
  // Timers or sockets the code left behind must not hold the task open.
  process.exit(0);
}

main();
