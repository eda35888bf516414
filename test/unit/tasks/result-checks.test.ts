import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PipeMessage } from '../../../src/contract/task.js';
import { PrintLog } from '../../../src/tasks/print-log.js';
import { ResultChannel } from '../../../src/tasks/result-channel.js';
import { forgery, oversizedResult } from '../../../src/tasks/result-checks.js';
import { encodeFrame } from '../../../src/wire/frame-codec.js';

const caps = { maxCalls: 3, maxBytes: 100, call: 'print()' };
const done: PipeMessage = { result: [], print_args: [] };

function channelOf(frames: Buffer[]): ResultChannel {
  const channel = new ResultChannel(1024, caps);
  for (const frame of frames) channel.write(frame);
  return channel;
}

describe('task prints on the host', () => {
  it('keeps the first maxCalls calls and counts the rest in the harness note', () => {
    const log = new PrintLog(caps);
    for (const text of ['a', 'b', 'c', 'd', 'e']) log.record([text]);
    assert.deepEqual(log.list(), [['a'], ['b'], ['c'], ['[2 more print() calls dropped: print_args keeps the first 3 calls, up to 100 bytes]']]);
  });

  it('stops at maxBytes of JSON, and drops every call after the first one dropped', () => {
    const log = new PrintLog(caps);
    log.record(['x'.repeat(90)]);
    log.record(['y'.repeat(20)]);
    log.record(['z']);
    assert.deepEqual(log.list(), [['x'.repeat(90)], ['[2 more print() calls dropped: print_args keeps the first 3 calls, up to 100 bytes]']]);
  });

  it('counts calls the harness dropped without sending them; a later print is dropped too', () => {
    const log = new PrintLog({ ...caps, call: 'console.log()' });
    log.drop(1);
    log.record(['late']);
    assert.deepEqual(log.list(), [['[2 more console.log() calls dropped: print_args keeps the first 3 calls, up to 100 bytes]']]);
  });
});

describe('task result channel: print frames', () => {
  it('records print and dropped frames before the message, capped by the host', () => {
    const prints = ['a', 'b', 'c', 'd'].map((text) => encodeFrame({ print: [text] }));
    const channel = channelOf([...prints, encodeFrame({ dropped: 5 }), encodeFrame(done)]);
    assert.deepEqual(channel.read(), { message: done });
    assert.deepEqual(channel.printArgs(), [['a'], ['b'], ['c'], ['[6 more print() calls dropped: print_args keeps the first 3 calls, up to 100 bytes]']]);
  });

  it('keeps the prints when the message never comes', () => {
    const channel = channelOf([encodeFrame({ print: ['a'] })]);
    assert.deepEqual(channel.read(), { silent: true });
    assert.deepEqual(channel.printArgs(), [['a']]);
  });

  const protocolErrors: Array<[string, Buffer[], RegExp]> = [
    ['a print after the message', [encodeFrame(done), encodeFrame({ print: ['late'] })], /^the task wrote to its result pipe after its message$/],
    ['a partial frame after the message', [encodeFrame(done), Buffer.from([0, 0])], /^the task wrote to its result pipe after its message$/],
    ['a bad frame after the message', [encodeFrame(done), Buffer.from([0, 0, 0, 1, 0x7b])], /^the task wrote to its result pipe after its message$/],
    ['a print that is not strings', [encodeFrame({ print: [1] })], /print message is malformed: print\.0 must be a string/],
    ['a print with another field', [encodeFrame({ print: [], extra: 1 })], /print message is malformed: extra is not a known field/],
    ['a dropped count below 1', [encodeFrame({ dropped: 0 })], /print message is malformed: dropped must be >= 1/],
  ];
  for (const [name, frames, message] of protocolErrors) {
    it(`reports ${name} as a protocol error no kill explains`, () => {
      const read = channelOf(frames).read();
      assert.ok('protocolError' in read, JSON.stringify(read));
      assert.match(read.protocolError, message);
      assert.equal(read.cutOff, undefined);
    });
  }

  it('marks a message cut off before its end, which a kill explains', () => {
    const read = channelOf([encodeFrame({ print: ['a'] }), encodeFrame(done).subarray(0, 6)]).read();
    assert.deepEqual(read, { protocolError: 'stream ended inside a frame (2 of 29 payload bytes)', cutOff: true });
  });
});

describe('task message checks', () => {
  const perItem = { mode: 'per_item' as const, inputCount: 3 };

  it('accepts the print_args the host recorded and pairings the harness gives', () => {
    const message: PipeMessage = {
      result: [
        { json: {}, pairedItem: { item: 0 } },
        { json: {}, pairedItem: { item: 2 } },
      ],
      print_args: [['a']],
    };
    assert.equal(forgery(message, [['a']], perItem), null);
  });

  it('refuses print_args other than those the host recorded', () => {
    assert.match(forgery({ ...done, print_args: [['a'], ['b']] }, [['a']], perItem) ?? '', /print_args \(2 entries\) other than the print calls it made \(1 entries\)/);
    assert.match(forgery({ error: { message: '', description: '', stack: '', stderr: '' }, print_args: [] }, [['a']], perItem) ?? '', /print_args/);
  });

  it('leaves pairedItem alone in all_items mode, as the harness does', () => {
    assert.equal(forgery({ result: [{ json: {}, pairedItem: 'anything' }], print_args: [] }, [], { mode: 'all_items', inputCount: 0 }), null);
  });

  const pairings: Array<[string, unknown[], RegExp]> = [
    ['missing', [undefined], /result\[0\]\.pairedItem is missing/],
    ['of another shape', [{ item: 0, more: 1 }], /result\[0\]\.pairedItem is \{"item":0,"more":1\}, not \{"item": <input index>\}/],
    ['past the inputs', [{ item: 3 }], /result\[0\]\.pairedItem\.item is 3, not the index of one of the 3 input items/],
    ['not an integer', [{ item: '1' }], /result\[0\]\.pairedItem\.item is "1"/],
    ['repeated', [{ item: 1 }, { item: 1 }], /result\[1\]\.pairedItem\.item is 1 after 1: each input gives at most one output, in order/],
    ['out of order', [{ item: 2 }, { item: 1 }], /result\[1\]\.pairedItem\.item is 1 after 2/],
  ];
  for (const [name, paired, message] of pairings) {
    it(`refuses a per_item pairedItem ${name}`, () => {
      const result = paired.map((pairedItem) => (pairedItem === undefined ? { json: {} } : { json: {}, pairedItem }));
      assert.match(forgery({ result, print_args: [] }, [], perItem) ?? '', message);
    });
  }

  it('measures the result as the host sends it, with the harness message', () => {
    const result = [{ json: { a: 'x'.repeat(10) } }];
    const size = Buffer.byteLength(JSON.stringify(result));
    assert.equal(oversizedResult(result, size), null);
    assert.equal(oversizedResult(result, size - 1), `the result is ${size} bytes of JSON, over max_result_bytes (${size - 1})`);
  });
});
