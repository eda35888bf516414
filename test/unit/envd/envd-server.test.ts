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
import { fakeTarget } from '../../helpers/envd.js';

describe('envd server', () => {
  it('serves on a unix socket, as the worker listens with it', async (context) => {
    const directory = mkdtempSync(join(tmpdir(), 'envd-'));
    context.after(() => rmSync(directory, { recursive: true, force: true }));
    const target = fakeTarget();
    const { server } = createEnvdServer((sandboxId) => (sandboxId === 'sbx1' ? target : undefined), new CodeContexts(), envdLimits(configDefaults({})));
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
});
