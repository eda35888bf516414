import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Sandbox } from 'e2b';
import { startServer, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

const MCP_PORT = 3333;

/**
 * The fixture MCP server and its SDK, as one file node runs in the sandbox: bundled by esbuild's
 * command (its binary, or the script npm left in its place), run to its end: its JS API keeps a
 * service process that outlives the test.
 */
function bundledServer(): string {
  const entry = fileURLToPath(new URL('../../fixtures/mcp/http-server.ts', import.meta.url));
  const esbuild = createRequire(import.meta.url).resolve('esbuild/bin/esbuild');
  return execFileSync(esbuild, [entry, '--bundle', '--platform=node', '--format=esm', '--log-level=warning'], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
}

/** An MCP client of the sandbox's port through the service, by E2B's headers (a host name `{port}-{id}.{domain}` does as well). */
async function connected(server: ServerProcess, sandbox: Sandbox, token: string | undefined): Promise<Client> {
  const headers: Record<string, string> = { 'e2b-sandbox-id': sandbox.sandboxId, 'e2b-sandbox-port': String(MCP_PORT) };
  if (token !== undefined) headers['e2b-traffic-access-token'] = token;
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', server.url), { requestInit: { headers } }));
  return client;
}

describe('an MCP server inside a sandbox, reached through its port', () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer([]);
  });
  after(async () => {
    await server.stop();
  });

  it('speaks to an MCP client through the service with the sandbox’s traffic token, and to none without it', async () => {
    const sandbox = await Sandbox.create('base', { apiKey: server.token!, apiUrl: server.url, sandboxUrl: server.url, network: { allowPublicTraffic: false } });
    try {
      const token = sandbox.trafficAccessToken;
      assert.ok(token);
      await sandbox.files.write('http-server.mjs', bundledServer());
      await sandbox.files.write('marker.txt', 'written into the sandbox\n');
      await (await sandbox.commands.run(`node http-server.mjs ${MCP_PORT}`, { background: true })).disconnect();
      let client: Client | undefined;
      await waitUntil(async () => {
        client = await connected(server, sandbox, token).catch(() => undefined);
        return client !== undefined;
      }, 'the MCP server in the sandbox answers');
      assert.deepEqual(
        (await client!.listTools()).tools.map((tool) => tool.name),
        ['where'],
      );
      const answer = await client!.callTool({ name: 'where', arguments: { greeting: 'hello' } });
      assert.deepEqual(answer.content, [{ type: 'text', text: 'hello from sandbox in /home/user (written into the sandbox)' }]);
      await client!.close();
      await assert.rejects(connected(server, sandbox, undefined), /403|traffic access token/);
      await assert.rejects(connected(server, sandbox, 'not-the-token'), /403|traffic access token/);
    } finally {
      await sandbox.kill();
    }
  });
});
