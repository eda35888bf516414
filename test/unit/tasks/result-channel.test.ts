import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ResultChannel } from '../../../src/tasks/result-channel.js';
import { encodeFrame } from '../../../src/wire/frame-codec.js';

const result = { result: [{ json: { a: 1 } }], print_args: [['hi']] };
const error = { error: { message: 'm', description: 'd', stack: 's', stderr: '' }, print_args: [] };

function reading(chunks: Buffer[], maxMessageBytes = 1024) {
  const channel = new ResultChannel(maxMessageBytes);
  for (const chunk of chunks) channel.write(chunk);
  return channel.read();
}

describe('task result channel', () => {
  it('reads one message in the shared framing, however the bytes are split', () => {
    const frame = encodeFrame(result);
    assert.deepEqual(reading([...frame].map((byte) => Buffer.from([byte]))), { message: result });
    assert.deepEqual(reading([encodeFrame(error)]), { message: error });
  });

  it('reports nothing at all as silence', () => {
    assert.deepEqual(reading([]), { silent: true });
  });

  const protocolErrors: Array<[string, Buffer[], RegExp]> = [
    ['two messages', [encodeFrame(result), encodeFrame(result)], /^the task sent more than one message$/],
    ['a cut-off message', [encodeFrame(result).subarray(0, 10)], /stream ended inside a frame/],
    ['a message over the limit', [encodeFrame({ ...result, print_args: [['x'.repeat(2000)]] })], /exceeds the maximum of 1024 bytes/],
    ['both result and error', [encodeFrame({ ...result, error: error.error })], /malformed: error is not a known field/],
    ['neither result nor error', [encodeFrame({ print_args: [] })], /malformed: error is required/],
    ['print_args that are not strings', [encodeFrame({ ...result, print_args: [[1]] })], /malformed: print_args\.0\.0 must be a string/],
  ];
  for (const [name, chunks, message] of protocolErrors) {
    it(`reports ${name} as a protocol error`, () => {
      const read = reading(chunks);
      assert.ok('protocolError' in read, JSON.stringify(read));
      assert.match(read.protocolError, message);
    });
  }
});
