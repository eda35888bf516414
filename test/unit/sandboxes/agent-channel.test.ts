import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AgentChannel } from '../../../src/sandboxes/agent-channel.js';
import { AgentOperationError } from '../../../src/sandboxes/agent-port.js';

describe('sandbox agent channel', () => {
  it('refuses requests (busy) while an agent that stopped reading holds 64 MiB unread, instead of growing the worker', async () => {
    // Nothing reads the channel's stdin: an agent the code in its sandbox stopped with SIGSTOP.
    const channel = new AgentChannel();
    const data = Buffer.alloc(12 * 1024 * 1024).toString('base64');
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, index) =>
        Promise.race([channel.request({ op: 'write', path: `f${index}`, data, append: false }), new Promise((resolve) => setImmediate(() => resolve('waiting')))]).catch(
          (error: unknown) => error,
        ),
      ),
    );
    const busy = outcomes.filter((outcome) => outcome instanceof AgentOperationError && outcome.code === 'busy');
    assert.ok(busy.length > 0 && busy.length < outcomes.length, `some sent, then refused: ${outcomes.map(String).join(', ')}`);
    assert.ok(channel.stdin.readableLength + (channel.stdin as unknown as { writableLength: number }).writableLength < 100 * 1024 * 1024);
    channel.lose('test over');
  });
});
