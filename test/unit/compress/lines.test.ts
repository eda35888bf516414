import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LineSink, STREAM_BYTE_CAP, capLines, joinLines, markAround, normaliseStream } from '../../../src/compress/lines.js';

describe('normaliseStream', () => {
  it('splits on LF and CRLF without a phantom last line', () => {
    assert.deepEqual(normaliseStream('a\r\nb\nc\n').lines, ['a', 'b', 'c']);
    assert.deepEqual(normaliseStream('a\nb').lines, ['a', 'b']);
    assert.deepEqual(normaliseStream('').lines, []);
  });

  it('strips colour codes and says so', () => {
    const r = normaliseStream('\u001b[32m✓\u001b[39m ok\n\u001b]8;;http://x\u0007link\u001b]8;;\u0007\n');
    assert.deepEqual(r.lines, ['✓ ok', 'link']);
    assert.deepEqual(r.strategy, ['strip-ansi']);
  });

  it('keeps only the final state of a line redrawn with carriage returns', () => {
    const r = normaliseStream('progress 10%\rprogress 50%\rprogress 100%\ndone\n');
    assert.deepEqual(r.lines, ['progress 100%', 'done']);
    assert.deepEqual(r.strategy, ['collapse-cr']);
  });
});

describe('markAround', () => {
  it('marks the window and clamps at both ends', () => {
    const mask = new Uint8Array(6);
    markAround(mask, 0, 2, 1);
    markAround(mask, 5, 1, 3);
    assert.deepEqual([...mask], [1, 1, 0, 0, 1, 1]);
  });
});

describe('capLines', () => {
  it('returns the same array when it fits', () => {
    const lines = ['a', 'b'];
    assert.equal(capLines(lines, [false, false], 100), lines);
  });

  it('keeps every important line and the start and end of the rest', () => {
    const lines = Array.from({ length: 10_000 }, (_, i) => (i % 1000 === 500 ? `error: failure ${i}` : `line ${i} ${'x'.repeat(40)}`));
    const important = lines.map((l) => l.startsWith('error'));
    const out = capLines(lines, important, 16 * 1024);
    const size = Buffer.byteLength(joinLines(out));
    assert.ok(size <= 16 * 1024, `${size} bytes`);
    for (const line of lines.filter((l) => l.startsWith('error'))) assert.ok(out.includes(line), line);
    assert.ok(out.includes(lines[0]!));
    assert.ok(out.includes(lines[lines.length - 1]!));
    assert.ok(out.some((l) => /^… \[\d+ lines cut to stay under 16 KiB\]$/.test(l)));
  });
});

describe('LineSink', () => {
  it('caps its output at 64 KiB per stream and marks it omitted', () => {
    const sink = new LineSink();
    for (let i = 0; i < 20_000; i++) sink.keep(`plain line number ${i}`, false);
    sink.keep('error: the one that matters', true);
    const r = sink.finish();
    assert.ok(Buffer.byteLength(r.text) <= STREAM_BYTE_CAP);
    assert.ok(r.text.includes('error: the one that matters'));
    assert.equal(r.omitted, true);
    assert.ok(r.strategy.includes('cap-64k'));
  });

  it('cuts very long lines and says how much was cut', () => {
    const sink = new LineSink();
    sink.keep('z'.repeat(5000));
    const r = sink.finish();
    assert.match(r.text, /… \[\+3000 chars\]\n$/);
    assert.ok(r.strategy.includes('truncate-long-lines'));
  });
});
