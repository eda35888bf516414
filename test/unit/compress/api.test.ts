import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { COMPRESSION_MODES, compressOutput, type CompressionData } from '../../../src/compress/index.js';

const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

function assertConsistent(r: CompressionData): void {
  assert.equal(r.stdout_compressed_bytes, bytes(r.stdout));
  assert.equal(r.stderr_compressed_bytes, bytes(r.stderr));
  for (const n of [r.stdout_original_bytes, r.stderr_original_bytes, r.stdout_compressed_bytes, r.stderr_compressed_bytes]) {
    assert.ok(Number.isInteger(n) && n >= 0);
  }
  assert.ok(COMPRESSION_MODES.includes(r.mode));
  assert.ok(Array.isArray(r.strategy) && r.strategy.every((s) => typeof s === 'string'));
}

const noisyLog = Array.from({ length: 500 }, (_, i) => `2024-05-01T10:00:${String(i % 60).padStart(2, '0')}Z INFO request ${i} served in ${i % 7}ms`).join('\n');

describe('compressOutput', () => {
  it('lists the modes of the schema, off and route first', () => {
    assert.deepEqual([...COMPRESSION_MODES], ['off', 'route', 'errors', 'tests', 'logs', 'git', 'json', 'summary']);
    assert.ok(Object.isFrozen(COMPRESSION_MODES));
  });

  it('off returns both streams untouched', () => {
    const stdout = `${noisyLog}\n\u001b[31mred\u001b[0m`;
    const r = compressOutput({ mode: 'off', argv: ['node', '--test'], stdout, stderr: 'e\r\n' });
    assert.equal(r.stdout, stdout);
    assert.equal(r.stderr, 'e\r\n');
    assert.equal(r.applied, false);
    assert.equal(r.omitted, false);
    assert.equal(r.detected_kind, 'none');
    assert.deepEqual(r.strategy, []);
    assert.equal(r.stdout_original_bytes, r.stdout_compressed_bytes);
    assertConsistent(r);
  });

  it('counts UTF-8 bytes, not UTF-16 code units', () => {
    const stdout = 'é€😀\n';
    const r = compressOutput({ mode: 'off', stdout, stderr: '' });
    assert.equal(r.stdout_original_bytes, 2 + 3 + 4 + 1);
  });

  it('reports what it did and that something was dropped', () => {
    const r = compressOutput({ mode: 'logs', stdout: noisyLog, stderr: '' });
    assert.equal(r.applied, true);
    assert.equal(r.omitted, true);
    assert.equal(r.detected_kind, 'logs');
    assert.ok(r.strategy.includes('logs:fold-similar'));
    assert.ok(r.stdout_compressed_bytes < r.stdout_original_bytes / 10);
    assertConsistent(r);
  });

  it('leaves empty streams empty without invoking the guard', () => {
    const r = compressOutput({ mode: 'route', stdout: '', stderr: '' });
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, '');
    assert.equal(r.applied, false);
    assert.deepEqual(r.strategy, []);
    assertConsistent(r);
  });

  it('never throws and stays consistent for any mode on awkward input', () => {
    const awkward = ['', '\n', '\r\n\r\n', '{', '[1,2', '\u001b[', '\ud800 lone surrogate', 'a\rb\rc', 'x'.repeat(10_000)];
    for (const mode of COMPRESSION_MODES) {
      for (const stdout of awkward) {
        assertConsistent(compressOutput({ mode, argv: [], stdout, stderr: stdout }));
      }
    }
  });
});

describe('expansion guard', () => {
  it('returns a stream unchanged when compressing would not shrink it', () => {
    const stdout = 'src/a.ts(1,1): error TS2322: Type number is not assignable to type string.\n';
    const r = compressOutput({ mode: 'errors', stdout, stderr: '' });
    assert.equal(r.stdout, stdout);
    assert.equal(r.applied, false);
    assert.equal(r.omitted, false);
    assert.ok(r.strategy.includes('expansion-guard'));
    assert.equal(r.stdout_compressed_bytes, r.stdout_original_bytes);
  });

  it('guards each stream separately', () => {
    const r = compressOutput({ mode: 'logs', stdout: noisyLog, stderr: 'one line\n' });
    assert.equal(r.applied, true);
    assert.equal(r.stderr, 'one line\n');
    assert.ok(r.strategy.includes('expansion-guard'));
    assert.ok(r.strategy.includes('logs:fold-similar'));
    assert.ok(r.stdout_compressed_bytes < r.stdout_original_bytes);
  });

  it('never lets a compressed stream be larger than the original', () => {
    const inputs = ['a\n', '{"a":1}', 'diff --git a/x b/x\n+1\n', 'On branch main\n', 'FAIL x\n', noisyLog];
    for (const mode of COMPRESSION_MODES) {
      for (const stdout of inputs) {
        const r = compressOutput({ mode, stdout, stderr: '' });
        assert.ok(r.stdout_compressed_bytes <= r.stdout_original_bytes, `${mode} grew ${JSON.stringify(stdout.slice(0, 20))}`);
      }
    }
  });
});

describe('invalid UTF-8', () => {
  // What a decoder hands over for bytes that are not UTF-8: U+FFFD in place of each bad byte.
  const decoded = Buffer.from([0x66, 0x61, 0x69, 0x6c, 0xff, 0xfe, 0x0a]).toString('utf8');

  it('keeps replacement characters and counts them as three bytes', () => {
    assert.ok(decoded.includes('\ufffd'));
    const r = compressOutput({ mode: 'off', stdout: decoded, stderr: '' });
    assert.equal(r.stdout_original_bytes, 4 + 3 + 3 + 1);
  });

  it('does not lose error lines that contain them', () => {
    const binaryNoise = Buffer.from(Array.from({ length: 4000 }, (_, i) => (i * 37) % 256)).toString('utf8');
    const stderr = `${binaryNoise}\nerror: cannot open \ufffd\ufffd.bin: invalid header\n${binaryNoise}\n`;
    for (const mode of ['route', 'errors', 'logs', 'summary'] as const) {
      const r = compressOutput({ mode, stdout: '', stderr });
      assert.ok(r.stderr.includes('error: cannot open \ufffd\ufffd.bin: invalid header'), mode);
      assertConsistent(r);
    }
  });

  it('cuts long lines without splitting a surrogate pair', () => {
    const line = `${'a'.repeat(1999)}😀${'b'.repeat(3000)}`;
    const r = compressOutput({ mode: 'summary', stdout: `${line}\n`.repeat(100), stderr: '' });
    assert.ok(r.applied);
    assert.ok(!/[\ud800-\udbff](?![\udc00-\udfff])/.test(r.stdout), 'no lone high surrogate');
    assert.ok(!/(?<![\ud800-\udbff])[\udc00-\udfff]/.test(r.stdout), 'no lone low surrogate');
  });
});
