import { isDeepStrictEqual } from 'node:util';
import type { PipeMessage, PrintArgs, TaskItem, TaskRequest } from '../contract/task.js';

/**
 * What the host checks in a task's message itself, since the code can write the message as
 * well as the harness can. The harnesses do the same and name the error for the code's author;
 * these checks make sure nothing the harness would refuse gets past it.
 */

export interface Expected {
  mode: TaskRequest['mode'];
  inputCount: number;
}

/**
 * Why the message cannot be the harness's own, or null: its print_args are not the calls the
 * host was streamed (and capped), or, in per_item mode, its items are not paired as the harness
 * pairs them.
 */
export function forgery(message: PipeMessage, printArgs: PrintArgs, expected: Expected): string | null {
  if (!isDeepStrictEqual(message.print_args, printArgs)) {
    return `the task's message has print_args (${message.print_args.length} entries) other than the print calls it made (${printArgs.length} entries)`;
  }
  if ('result' in message && expected.mode === 'per_item') return pairingProblem(message.result, expected.inputCount);
  return null;
}

/**
 * per_item: the harness gives the value returned for input i `pairedItem: {item: i}`, in input
 * order, at most one per input (None / undefined gives none).
 */
function pairingProblem(result: readonly TaskItem[], inputCount: number): string | null {
  let previous = -1;
  for (const [index, item] of result.entries()) {
    const where = `result[${index}].pairedItem`;
    const paired = item.pairedItem;
    if (paired === null || typeof paired !== 'object' || Array.isArray(paired) || !isDeepStrictEqual(Object.keys(paired), ['item'])) {
      return `per_item: ${where} is ${paired === undefined ? 'missing' : JSON.stringify(paired)}, not {"item": <input index>}`;
    }
    const input = (paired as { item: unknown }).item;
    if (typeof input !== 'number' || !Number.isInteger(input) || input < 0 || input >= inputCount) {
      return `per_item: ${where}.item is ${JSON.stringify(input)}, not the index of one of the ${inputCount} input items`;
    }
    if (input <= previous) return `per_item: ${where}.item is ${input} after ${previous}: each input gives at most one output, in order`;
    previous = input;
  }
  return null;
}

/** The harness's own limit and message, on the result as the host will send it. */
export function oversizedResult(result: readonly TaskItem[], maxResultBytes: number): string | null {
  const size = Buffer.byteLength(JSON.stringify(result));
  return size > maxResultBytes ? `the result is ${size} bytes of JSON, over max_result_bytes (${maxResultBytes})` : null;
}
