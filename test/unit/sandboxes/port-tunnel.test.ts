import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ProcessListener, SandboxAgentPort } from '../../../src/sandboxes/agent-port.js';
import { PortTunnel } from '../../../src/sandboxes/port-tunnel.js';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('a port tunnel', () => {
  it('lets go of every chunk of output the reader could not take yet once it reads, however many came meanwhile', async () => {
    // The agent may send several chunks within its window while the reader holds: each is held
    // until it is read. Only the last was let go once: the others stayed held, the agent was
    // never credited for them, and a download through a port stalled.
    let listener: ProcessListener | undefined;
    const agent = {
      start: async (_request, heard) => ((listener = heard), { pid: 7, detach: () => undefined }),
      request: async () => ({ id: 1 }),
    } as Pick<SandboxAgentPort, 'start' | 'request'> as SandboxAgentPort;
    const tunnel = new PortTunnel(agent, 8000);
    await tunnel.open();
    const released = [0, 1, 2].map(() => {
      const held = listener!.output({ event: 'output', pid: 7, stream: 'stdout', data: Buffer.alloc(64 * 1024, 1) });
      const state = { released: held === undefined };
      void held?.then(() => (state.released = true));
      return state;
    });
    await tick();
    assert.deepEqual(
      released.map(({ released }) => released),
      [false, false, false],
      'past the reader’s buffer, each is held',
    );
    let read = 0;
    tunnel.on('data', (chunk: Buffer) => (read += chunk.length));
    await tick();
    await tick();
    assert.equal(read, 3 * 64 * 1024);
    assert.deepEqual(
      released.map(({ released }) => released),
      [true, true, true],
    );
    tunnel.destroy();
  });
});
