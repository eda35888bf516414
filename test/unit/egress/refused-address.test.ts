import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { refusedAddress } from '../../../src/egress/refused-address.js';

describe('addresses the egress proxy never connects to', () => {
  it('refuses loopback, private, ULA, link-local, CGNAT, unspecified and multicast, IPv4-mapped ones too', () => {
    const refused = [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '100.127.255.254',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::',
      '::1',
      'fd00::1',
      'fc12::1',
      'fe80::1',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
    ];
    for (const address of refused) assert.ok(refusedAddress(address, []), address);
  });

  it("refuses the host's own addresses, and lets public ones through", () => {
    assert.match(refusedAddress('203.0.113.9', ['203.0.113.9'])!, /an address of this host/);
    assert.match(refusedAddress('::ffff:203.0.113.9', ['203.0.113.9'])!, /an address of this host/);
    for (const address of ['203.0.113.9', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700::1111']) assert.equal(refusedAddress(address, []), null, address);
  });
});
