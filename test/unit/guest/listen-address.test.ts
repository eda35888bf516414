import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatListenAddress, parseListenAddress } from '../../../src/guest/listen-address.js';

describe('guest listen addresses', () => {
  it('parses unix, tcp (v4 and v6) and vsock addresses, and prints them back', () => {
    for (const text of ['unix:/run/guest.sock', 'tcp:127.0.0.1:7070', 'tcp:[::1]:7070', 'vsock:5000']) {
      assert.equal(formatListenAddress(parseListenAddress(text)), text);
    }
    assert.deepEqual(parseListenAddress('tcp:[::1]:7070'), { kind: 'tcp', host: '::1', port: 7070 });
  });

  it('rejects malformed addresses with the accepted forms', () => {
    for (const text of ['unix:relative.sock', 'tcp:127.0.0.1', 'tcp:host:99999', 'vsock:x', 'http://x', '']) {
      assert.throws(() => parseListenAddress(text), /expected unix:\/path\/to\.sock, tcp:HOST:PORT or vsock:PORT/);
    }
  });
});
