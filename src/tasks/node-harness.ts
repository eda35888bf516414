/**
 * The node side of a code task, staged read-only into the sandbox and run as
 * `node harness.cjs <code file> <input file>` with fd 3 as the result pipe (see launch.ts).
 * CommonJS, so the code can be handed `require`.
 */
export const NODE_HARNESS = String.raw`'use strict';
const fs = require('node:fs');
const util = require('node:util');
const vm = require('node:vm');

const RESULT_FD = 3;

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

/** console.log() calls as lists of formatted arguments: the first maxCalls, up to maxBytes of JSON. */
class Prints {
  constructor(maxCalls, maxBytes) {
    this.maxCalls = maxCalls;
    this.maxBytes = maxBytes;
    this.kept = [];
    this.keptBytes = 0;
    this.dropped = 0;
  }

  record(args) {
    const formatted = args.map((arg) => (typeof arg === 'string' ? arg : util.inspect(arg)));
    const size = Buffer.byteLength(JSON.stringify(formatted));
    if (this.dropped > 0 || this.kept.length === this.maxCalls || this.keptBytes + size > this.maxBytes) {
      this.dropped += 1;
    } else {
      this.kept.push(formatted);
      this.keptBytes += size;
    }
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
  const info = error instanceof Error
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

function send(payload) {
  if (sent) return;
  sent = true;
  const frame = Buffer.alloc(4 + payload.length);
  frame.writeUInt32BE(payload.length, 0);
  payload.copy(frame, 4);
  for (let offset = 0; offset < frame.length; ) offset += fs.writeSync(RESULT_FD, frame, offset);
}

async function main() {
  const [codePath, inputPath] = process.argv.slice(2);
  const task = JSON.parse(fs.readFileSync(inputPath, 'utf8'));
  const prints = new Prints(task.max_print_calls, task.max_print_bytes);
  for (const name of ['log', 'info', 'debug']) console[name] = (...args) => prints.record(args);
  process.on('exit', (code) => send(errorMessage(exitError(code), prints)));
  process.on('uncaughtException', (error) => {
    send(errorMessage(error, prints));
    process.exit(1);
  });
  let payload;
  try {
    payload = resultMessage(await run(task, codePath), prints, task.max_result_bytes);
  } catch (error) {
    payload = errorMessage(error, prints);
  }
  send(payload);
  // Timers or sockets the code left behind must not hold the task open.
  process.exit(0);
}

main();
`;
