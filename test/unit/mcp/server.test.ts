import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Type } from '@sinclair/typebox';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpFace } from '../../../src/mcp/server.js';
import type { Tool } from '../../../src/mcp/tool.js';
import { TOOLS } from '../../../src/mcp/tools/index.js';
import { toolInputSchema, toolOutputSchema } from '../../../src/mcp/json-schema.js';
import { testRuntime } from '../../helpers/runtime.js';

const EchoInput = Type.Object({ word: Type.String({ minLength: 1 }) }, { $id: 'EchoInput', additionalProperties: false });
const EchoOutput = Type.Object({ word: Type.String() }, { $id: 'EchoOutput', additionalProperties: false });

const echo: Tool<typeof EchoInput> = {
  name: 'echo',
  title: 'echo',
  description: 'echoes',
  input: EchoInput,
  output: EchoOutput,
  call: async ({ word }) => ({ result: { word }, text: word }),
};

/** Tools that exercise the face itself: an answer, a refusal, a throw, a call that waits to be aborted. */
const seen: string[] = [];
const fakeTools: Tool[] = [
  echo,
  {
    name: 'refuse',
    title: 'refuse',
    description: 'refuses',
    input: Type.Object({}),
    output: EchoOutput,
    call: async () => ({ error: { code: 'validation.path_escape', message: 'no', details: { field: 'path' } } }),
  },
  {
    name: 'throw',
    title: 'throw',
    description: 'throws',
    input: Type.Object({}),
    output: EchoOutput,
    call: async () => {
      throw new Error('boom');
    },
  },
  {
    name: 'wait',
    title: 'wait',
    description: 'waits for its abort',
    input: Type.Object({}),
    output: EchoOutput,
    call: (_input, { signal }) =>
      new Promise((resolve) => {
        seen.push('started');
        signal.addEventListener('abort', () => {
          seen.push('aborted');
          resolve({ result: { word: 'aborted' }, text: 'aborted' });
        });
      }),
  },
];

describe('the MCP face', () => {
  const logged: string[] = [];
  const face = new McpFace({ runtime: testRuntime(), tools: fakeTools, log: (line) => logged.push(line) });
  const client = new Client({ name: 'unit', version: '0' });

  before(async () => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await face.connect(serverSide);
    await client.connect(clientSide);
    await client.listTools();
  });
  after(() => client.close());

  it('answers structuredContent and text', async () => {
    const result = await client.callTool({ name: 'echo', arguments: { word: 'hi' } });
    assert.deepEqual(result, { content: [{ type: 'text', text: 'hi' }], structuredContent: { word: 'hi' } });
  });

  it('refuses arguments off the schema before the tool sees them, naming the field', async () => {
    const result = await client.callTool({ name: 'echo', arguments: { word: 'hi', extra: 1 } });
    assert.deepEqual(result.structuredContent, { error: { code: 'validation.invalid_request', message: 'extra is not a known field', details: { field: 'extra' } } });
    assert.equal(result.isError, true);
    const missing = await client.callTool({ name: 'echo' });
    assert.deepEqual(missing.structuredContent, { error: { code: 'validation.invalid_request', message: 'word is required', details: { field: 'word' } } });
  });

  it("passes a tool's own refusal on with its code", async () => {
    const result = await client.callTool({ name: 'refuse' });
    assert.equal(result.isError, true);
    assert.deepEqual(result.structuredContent, { error: { code: 'validation.path_escape', message: 'no', details: { field: 'path' } } });
  });

  it('turns a tool that throws into internal.error, logged, and keeps serving', async () => {
    const result = await client.callTool({ name: 'throw' });
    assert.equal(result.isError, true);
    assert.deepEqual(result.structuredContent, { error: { code: 'internal.error', message: 'internal error: boom' } });
    assert.ok(
      logged.some((line) => line.includes('throw failed') && line.includes('boom')),
      logged.join('\n'),
    );
    assert.deepEqual((await client.callTool({ name: 'echo', arguments: { word: 'after' } })).structuredContent, { word: 'after' });
  });

  it('close() aborts the calls running and waits for them', async () => {
    const waiting = client.callTool({ name: 'wait' });
    while (!seen.includes('started')) await new Promise((resolve) => setImmediate(resolve));
    await face.close();
    assert.deepEqual(seen, ['started', 'aborted']);
    // The answer may or may not reach a client whose transport closes under it; the call ended.
    await waiting.catch(() => undefined);
  });
});

describe('tool schemas', () => {
  it('are plain JSON with no $id at any depth, and the output names the refusal too', () => {
    for (const tool of TOOLS) {
      const input = toolInputSchema(tool.input);
      assert.equal(input.type, 'object', tool.name);
      assert.ok(!JSON.stringify(input).includes('"$id"'), tool.name);
      const output = toolOutputSchema(tool.output) as { type: string; anyOf: Array<{ properties: Record<string, unknown> }> };
      assert.equal(output.type, 'object');
      assert.equal(output.anyOf.length, 2);
      assert.deepEqual(Object.keys(output.anyOf[1]!.properties), ['error']);
      assert.ok(!JSON.stringify(output).includes('"$id"'), tool.name);
    }
  });
});
