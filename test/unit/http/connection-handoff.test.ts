import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { firstRequestHeaders } from '../../../src/http/connection-handoff.js';

describe("a connection's first request, looked at before the HTTP server parses it", () => {
  it('gives its header fields, names lowercased, when its head is whole in the first read', () => {
    const read = Buffer.from('GET / HTTP/1.1\r\nHost: 8000-abc.example\r\nX-Thing:  two words \r\n\r\nbody');
    assert.deepEqual(firstRequestHeaders(read), { host: '8000-abc.example', 'x-thing': 'two words' });
  });

  it('gives nothing for a head cut short, a field without a name, or a field twice: the HTTP server parses those', () => {
    assert.equal(firstRequestHeaders(Buffer.from('GET / HTTP/1.1\r\nHost: a\r\n')), null);
    assert.equal(firstRequestHeaders(Buffer.from('GET / HTTP/1.1\r\n: a\r\n\r\n')), null);
    assert.equal(firstRequestHeaders(Buffer.from('GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n')), null);
    assert.equal(firstRequestHeaders(Buffer.from(`GET / HTTP/1.1\r\nX: ${'a'.repeat(20_000)}\r\n\r\n`)), null);
  });
});
