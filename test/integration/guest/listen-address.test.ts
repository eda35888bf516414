import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startGuestServer } from '../../../src/guest/server.js';
import { testRuntime } from '../../helpers/runtime.js';

describe('guest listen addresses', () => {
  it(
    'listens on vsock through a socat bridge where the host has /dev/vsock, and leaves no bridge dir behind',
    { skip: !existsSync('/dev/vsock') && 'no /dev/vsock on this host' },
    async () => {
      // The bridge's dir goes under the temp dir: point it at one of our own to see what close leaves.
      const temp = mkdtempSync(join(tmpdir(), 'vsock-test-'));
      const previous = process.env.TMPDIR;
      process.env.TMPDIR = temp;
      try {
        const server = await startGuestServer({ kind: 'vsock', port: 40000 + Math.floor(Math.random() * 1000) }, { runtime: testRuntime() });
        assert.equal(server.address.kind, 'vsock');
        assert.equal(readdirSync(temp).length, 1);
        await server.close();
        assert.deepEqual(readdirSync(temp), []);
      } finally {
        if (previous === undefined) delete process.env.TMPDIR;
        else process.env.TMPDIR = previous;
        rmSync(temp, { recursive: true, force: true });
      }
    },
  );
});
