import assert from 'node:assert/strict';
import { openSync, readSync, closeSync } from 'node:fs';
import { describe, it } from 'node:test';
import { interpreterOf } from '../../../src/isolation/program-interpreter.js';

function head(path: string): Buffer {
  const fd = openSync(path, 'r');
  try {
    const buffer = Buffer.alloc(4096);
    return buffer.subarray(0, readSync(fd, buffer, 0, buffer.length, 0));
  } finally {
    closeSync(fd);
  }
}

describe('interpreterOf', () => {
  it('reads the loader of a dynamic ELF', () => {
    const found = interpreterOf(head('/usr/bin/ls'));
    assert.equal(found?.kind, 'elf');
    assert.match(found!.path, /^\/lib.*\/ld-linux[^/]*\.so\.\d$/);
  });

  it('reads a #! line with and without its argument', () => {
    assert.deepEqual(interpreterOf(Buffer.from('#!/usr/bin/env python3\nprint(1)\n')), { kind: 'script', path: '/usr/bin/env', argument: 'python3' });
    assert.deepEqual(interpreterOf(Buffer.from('#! /bin/sh\n')), { kind: 'script', path: '/bin/sh', argument: null });
  });

  it('has nothing for text or a truncated ELF', () => {
    assert.equal(interpreterOf(Buffer.from('print(1)\n')), null);
    assert.equal(interpreterOf(head('/usr/bin/ls').subarray(0, 64)), null);
  });
});
