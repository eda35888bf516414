import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { startGuestServer } from '../../../src/guest/server.js';
import { testRuntime } from '../../helpers/runtime.js';

describe('guest listen addresses', () => {
  it('listens on vsock through a socat bridge where the host has /dev/vsock', { skip: !existsSync('/dev/vsock') && 'no /dev/vsock on this host' }, async () => {
    const server = await startGuestServer({ kind: 'vsock', port: 40000 + Math.floor(Math.random() * 1000) }, { runtime: testRuntime() });
    assert.equal(server.address.kind, 'vsock');
    await server.close();
  });
});
