import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { EgressProxy, PROXY_MAX_CONNECTIONS } from '../../../src/egress/egress-proxy.js';
import { waitUntil } from '../../helpers/wait.js';

/**
 * Each connection to a job's proxy may hold a host process (a microVM's forward runs socat for
 * each, outside any cgroup of the job's): the proxy itself bounds how many it serves at once.
 */
describe('egress proxy connections', () => {
  const dir = mkdtempSync(join(tmpdir(), 'egress-proxy-'));
  const proxy = new EgressProxy({ domains: [], secrets: [] }, null);
  after(() => {
    proxy.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`serves ${PROXY_MAX_CONNECTIONS} at once and closes the one past them`, async () => {
    const path = join(dir, 'egress.sock');
    await proxy.listen(path);
    const closed: Socket[] = [];
    const open = (): Promise<Socket> =>
      new Promise((resolve, reject) => {
        const socket = connect(path, () => resolve(socket));
        socket.on('error', reject);
        socket.on('close', () => closed.push(socket));
      });
    const sockets: Socket[] = [];
    for (let count = 0; count <= PROXY_MAX_CONNECTIONS; count += 1) sockets.push(await open());
    // Whichever the proxy accepted last is the one past the bound, and no other.
    await waitUntil(() => closed.length > 0, 'the proxy closed a connection', { seen: () => `${closed.length} closed` });
    assert.equal(closed.length, 1);
    for (const socket of sockets) socket.destroy();
  });
});
