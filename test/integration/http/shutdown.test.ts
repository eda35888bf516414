import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { api, startServer, waitForStatus } from '../../helpers/server.js';

describe('serve shuts down in order', () => {
  // systemd (KillMode=control-group, mixed) and a terminal's Ctrl-C signal every process of the
  // service, the worker included, not the front door alone. Whether the worker died first was a
  // race, so the attempt is repeated.
  it('a SIGTERM to the whole process group lets the running job finish in its grace and exits 0, every time', async () => {
    for (let attempt = 1; attempt <= 4; attempt++) {
      const server = await startServer(['--concurrency', '1', '--grace-ms', '60000'], { detached: true });
      try {
        const running = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['sleep', '2'] } });
        await waitForStatus(server.url, running.json.job_id, 'running');
        process.kill(-server.child.pid!, 'SIGTERM');
        assert.equal(await server.exited, 0, `attempt ${attempt}: serve exits 0 (stderr: ${server.stderr()})`);
        const status = JSON.parse(readFileSync(join(server.storeDir, 'runs', running.json.job_id, 'status.json'), 'utf8'));
        assert.equal(status.status, 'completed', `attempt ${attempt}: the job had its grace, it was not interrupted (${JSON.stringify(status)})`);
      } finally {
        await server.stop();
      }
    }
  });
});
