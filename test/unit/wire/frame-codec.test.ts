import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FrameDecoder, FrameError, encodeFrame, encodeFrameParts } from '../../../src/wire/frame-codec.js';

function header(length: number): Buffer {
  const buffer = Buffer.alloc(4);
  buffer.writeUInt32BE(length, 0);
  return buffer;
}

/** Everything one push delivers (messages before a bad frame arrive before it throws). */
function collect(decoder: FrameDecoder, chunk: Buffer): unknown[] {
  const messages: unknown[] = [];
  decoder.push(chunk, (message) => messages.push(message));
  return messages;
}

function expectFrameError(action: () => unknown, code: string): void {
  assert.throws(action, (error: unknown) => error instanceof FrameError && error.code === code);
}

describe('frame codec', () => {
  it('encodes the spec example as a 4-byte big-endian length then UTF-8 JSON', () => {
    const frame = encodeFrame({ trace_id: 't1', lang: 'python', code: 'print(1)', timeout: 10 });
    // The spec's byte sequence says 0x3F (63), but that JSON text is 64 bytes long: the
    // prefix is the payload's true length.
    assert.deepEqual([...frame.subarray(0, 4)], [0x00, 0x00, 0x00, 0x40]);
    assert.equal(frame.length - 4, 0x40);
    assert.equal(frame.subarray(4).toString('utf8'), '{"trace_id":"t1","lang":"python","code":"print(1)","timeout":10}');
  });

  it('decodes a frame delivered one byte at a time', () => {
    const message = { text: 'héllo ✓', n: [1, 2, 3] };
    const frame = encodeFrame(message);
    const decoder = new FrameDecoder();
    const received: unknown[] = [];
    for (const byte of frame) received.push(...collect(decoder, Buffer.from([byte])));
    assert.deepEqual(received, [message]);
    decoder.end();
  });

  it('decodes several pipelined frames from one chunk, and a frame split across chunks', () => {
    const frames = Buffer.concat([encodeFrame({ n: 1 }), encodeFrame({ n: 2 }), encodeFrame({ n: 3 })]);
    const decoder = new FrameDecoder();
    const first = collect(decoder, frames.subarray(0, frames.length - 5));
    const rest = collect(decoder, frames.subarray(frames.length - 5));
    assert.deepEqual([...first, ...rest], [{ n: 1 }, { n: 2 }, { n: 3 }]);
  });

  it('refuses an oversize frame from its header alone, before any payload arrives', () => {
    const decoder = new FrameDecoder(1024);
    expectFrameError(() => collect(decoder, header(0xffff_fff0)), 'frame.too_large');
  });

  it('accepts a frame of exactly the maximum size', () => {
    const payload = Buffer.from(JSON.stringify('x'.repeat(98)));
    assert.equal(payload.length, 100);
    assert.deepEqual(collect(new FrameDecoder(100), Buffer.concat([header(100), payload])), ['x'.repeat(98)]);
  });

  it('refuses to encode past the maximum', () => {
    expectFrameError(() => encodeFrame('x'.repeat(200), 100), 'frame.too_large');
  });

  it('writes a frame with bytes as its head and the bytes themselves, the same frame in two parts, the bytes not copied', () => {
    const bytes = Buffer.from([0, 1, 2, 255]);
    const [head, tail] = encodeFrameParts({ op: 'write' }, 64, bytes);
    assert.equal(tail, bytes);
    assert.deepEqual(Buffer.concat([head, tail]), encodeFrame({ op: 'write' }, 64, bytes));
    const decoded: Array<[unknown, Buffer | undefined]> = [];
    new FrameDecoder(64, true).push(Buffer.concat([head, tail]), (message, raw) => decoded.push([message, raw]));
    assert.deepEqual(decoded, [[{ op: 'write' }, bytes]]);
    assert.throws(
      () => encodeFrameParts({ op: 'write' }, 16, bytes),
      (error: FrameError) => error.code === 'frame.too_large',
    );
  });

  it('reports a truncated frame at end of stream', () => {
    const decoder = new FrameDecoder();
    collect(decoder, encodeFrame({ a: 1 }).subarray(0, 7));
    expectFrameError(() => decoder.end(), 'frame.truncated');
    const headerOnly = new FrameDecoder();
    collect(headerOnly, Buffer.from([0, 0]));
    expectFrameError(() => headerOnly.end(), 'frame.truncated');
  });

  it('rejects invalid UTF-8, invalid JSON and zero-length frames with their own codes', () => {
    const invalidUtf8 = Buffer.from([0x22, 0xc3, 0x28, 0x22]);
    expectFrameError(() => collect(new FrameDecoder(), Buffer.concat([header(invalidUtf8.length), invalidUtf8])), 'frame.invalid_utf8');
    const invalidJson = Buffer.from('{"a":');
    expectFrameError(() => collect(new FrameDecoder(), Buffer.concat([header(invalidJson.length), invalidJson])), 'frame.invalid_json');
    expectFrameError(() => collect(new FrameDecoder(), header(0)), 'frame.empty');
  });

  it('delivers the good frames that came before a bad one, then throws', () => {
    const delivered: unknown[] = [];
    const bytes = Buffer.concat([encodeFrame({ n: 1 }), header(2), Buffer.from('no')]);
    expectFrameError(() => new FrameDecoder().push(bytes, (message) => delivered.push(message)), 'frame.invalid_json');
    assert.deepEqual(delivered, [{ n: 1 }]);
  });
});
