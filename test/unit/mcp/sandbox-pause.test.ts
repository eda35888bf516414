import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Sandbox, SandboxPauseRequest } from '../../../src/contract/sandbox.js';
import { sandboxPauseTool } from '../../../src/mcp/tools/sandbox-pause.js';

describe('the sandbox_pause tool', () => {
  it('passes keep_memory on as the pause request says it (files only, memory required, or the most the backend keeps)', async () => {
    const asked: SandboxPauseRequest[] = [];
    const sandboxes = {
      pause: async (id: string, request: SandboxPauseRequest) => {
        asked.push(request);
        return { id, kept: request.keep_memory === false ? 'files' : 'memory' } as Sandbox;
      },
    };
    const id = 'a'.repeat(24);
    const context = { sandboxes } as unknown as Parameters<typeof sandboxPauseTool.call>[1];
    const filesOnly = await sandboxPauseTool.call({ sandbox_id: id, keep_memory: false }, context);
    assert.ok('text' in filesOnly && /kept: files/.test(filesOnly.text), JSON.stringify(filesOnly));
    await sandboxPauseTool.call({ sandbox_id: id, keep_memory: true }, context);
    await sandboxPauseTool.call({ sandbox_id: id }, context);
    assert.deepEqual(asked, [{ keep_memory: false }, { keep_memory: true }, {}]);
    assert.ok('keep_memory' in sandboxPauseTool.input.properties, 'offered to the model with the contract’s description');
  });
});
