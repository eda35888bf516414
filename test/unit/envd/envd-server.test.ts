import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { createEnvdServer, envdLimits } from '../../../src/envd/envd-server.js';
import { configDefaults } from '../../../src/config/schema.js';
import { CodeContexts } from '../../../src/interpreter/code-contexts.js';
import { fakeTarget, startEnvd } from '../../helpers/envd.js';
import { CODE_INTERPRETER_PORT } from '../../../src/contract/code-interpreter.js';

describe('envd server', () => {
  it('serves on a unix socket, as the worker listens with it', async (context) => {
    const directory = mkdtempSync(join(tmpdir(), 'envd-'));
    context.after(() => rmSync(directory, { recursive: true, force: true }));
    const target = fakeTarget();
    const { server } = createEnvdServer(
      { lookup: (sandboxId) => (sandboxId === 'sbx1' ? target : undefined), runningIds: () => ['sbx1'], wake: async () => false },
      new CodeContexts(),
      envdLimits(configDefaults({})),
    );
    server.listen(join(directory, 'envd.sock'));
    await once(server, 'listening');
    context.after(() => server.close());
    const status = (sandboxId: string) =>
      new Promise<number>((resolve, reject) => {
        request({ socketPath: join(directory, 'envd.sock'), path: '/health', headers: { 'E2b-Sandbox-Id': sandboxId } }, (response) => {
          response.resume();
          resolve(response.statusCode!);
        })
          .on('error', reject)
          .end();
      });
    assert.equal(await status('sbx1'), 204);
    assert.equal(await status('other'), 502);
  });

  it("counts the values of a code-interpreter body before parsing it: one sandbox's wide body does not hold the worker", async (context) => {
    const envd = await startEnvd();
    context.after(() => envd.close());
    envd.sandboxes.set('sbx1', fakeTarget());
    const post = async (path: string, body: string) => {
      const response = await fetch(`${envd.url}${path}`, {
        method: 'POST',
        headers: { 'E2b-Sandbox-Id': 'sbx1', 'E2b-Sandbox-Port': String(CODE_INTERPRETER_PORT), 'content-type': 'application/json' },
        body,
      });
      return { status: response.status, text: await response.text() };
    };
    // 4 million values within the 8 MiB this server takes.
    const wide = `{"code": "1", "env_vars": {"A": "b"}, "x": [${'0,'.repeat(4_000_000)}0]}`;
    for (const path of ['/execute', '/contexts']) {
      const refused = await post(path, wide);
      assert.equal(refused.status, 400);
      assert.match(refused.text, /holds more than 1000000 values/);
    }
    const health = await fetch(`${envd.url}/health`, { headers: { 'E2b-Sandbox-Id': 'sbx1', 'E2b-Sandbox-Port': String(CODE_INTERPRETER_PORT) } });
    assert.equal(health.status, 200);
  });
});
