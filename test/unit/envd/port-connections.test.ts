import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PortConnections } from '../../../src/envd/port-connections.js';

describe('PortConnections', () => {
  it("refuses a sandbox's connection past its share, and takes one again once one closed", () => {
    const connections = new PortConnections({ maxPerSandbox: 2, maxPerKey: 10 });
    const first = connections.open('a', 'alice', 'http');
    const second = connections.open('a', 'alice', 'upgrade');
    assert.ok('close' in first && 'close' in second);
    const third = connections.open('a', 'alice', 'http');
    assert.ok('refused' in third);
    assert.match(third.refused, /^sandbox a has 2 connections to its ports open/);
    // Another sandbox has its own share.
    assert.ok('close' in connections.open('b', 'alice', 'http'));
    first.close();
    // Closing twice frees one slot, not two.
    first.close();
    assert.ok('close' in connections.open('a', 'alice', 'http'));
    assert.ok('refused' in connections.open('a', 'alice', 'http'));
  });

  it("counts the sandboxes of one API key together; the service token's are not counted", () => {
    const connections = new PortConnections({ maxPerSandbox: 10, maxPerKey: 2 });
    assert.ok('close' in connections.open('a', 'alice', 'http'));
    assert.ok('close' in connections.open('b', 'alice', 'http'));
    const refused = connections.open('c', 'alice', 'http');
    assert.ok('refused' in refused);
    assert.match(refused.refused, /API key alice have 2 connections/);
    assert.ok('close' in connections.open('c', 'bob', 'http'));
    for (let i = 0; i < 5; i++) assert.ok('close' in connections.open('d', undefined, 'http'));
  });
});
