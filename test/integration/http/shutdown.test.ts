import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { api, startServer, waitForStatus, type ServerProcess } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

/** Mount points under `dir`, as this process's mount namespace (the service's too) sees them. */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((mountPoint) => mountPoint.startsWith(`${dir}/`));
}

/** Host processes whose command line names `dir` (bwrap, runsc and their helpers bind paths under it). */
function processesNaming(dir: string): string[] {
  try {
    return execFileSync('pgrep', ['-af', dir], { encoding: 'utf8' }).split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

describe('serve shuts down in order', () => {
  // systemd (KillMode=control-group, mixed) and a terminal's Ctrl-C signal every process of the
  // service, the worker included, not the front door alone. Whether the worker died first was a
  // race, so the attempt is repeated (four services at once: the same race, a quarter of the wait).
  it('a SIGTERM to the whole process group lets the running job finish in its grace and exits 0, every time', async () => {
    const attempt = async (attempt: number) => {
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
    };
    await Promise.all([1, 2, 3, 4].map(attempt));
  });

  it("envd's socket directory is removed at a clean stop and when the front door is killed; a killed worker's, by the next worker", async () => {
    // A temp dir of their own, shared by the services in turn: what is in it is theirs.
    const tmp = mkdtempSync(join(tmpdir(), 'envd-dirs-'));
    const envdDirs = () => readdirSync(tmp).filter((name) => name.startsWith('agent-runner-envd-'));
    const servers: ServerProcess[] = [];
    /** A service whose worker listens; its envd dir, once it is the only one there (`left`: a dir that may still be there). */
    const started = async (left?: string) => {
      const server = await startServer([], { env: { TMPDIR: tmp }, detached: true });
      servers.push(server);
      await waitUntil(() => envdDirs().filter((name) => name !== left).length === 1, "the worker's envd listens", { seen: () => envdDirs().join(', ') });
      return { server, dir: envdDirs().find((name) => name !== left)! };
    };
    try {
      const stopped = await started();
      stopped.server.child.kill('SIGTERM');
      assert.equal(await stopped.server.exited, 0, stopped.server.stderr());
      assert.deepEqual(envdDirs(), [], 'a clean stop removes it');

      const orphaned = await started();
      orphaned.server.child.kill('SIGKILL');
      await waitUntil(() => envdDirs().length === 0, 'the orphaned worker removes it as it ends', { seen: () => envdDirs().join(', ') });

      const killed = await started();
      process.kill(-killed.server.child.pid!, 'SIGKILL');
      await killed.server.exited;
      const worker = Number(killed.dir.split('-')[3]);
      await waitUntil(() => !existsSync(`/proc/${worker}/cmdline`) || readFileSync(`/proc/${worker}/cmdline`).length === 0, 'the killed worker has exited');
      assert.deepEqual(envdDirs(), [killed.dir], 'a killed worker leaves it');
      const next = await started(killed.dir);
      assert.deepEqual(envdDirs(), [next.dir], "the next worker removed the killed one's");
    } finally {
      await Promise.all(servers.map((server) => server.stop()));
    }
  });

  it('a clean SIGTERM leaves no work-dir mount and no process under the state dir: jobs, snippets, pre-started sandboxes and sessions included', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'serve-shutdown-'));
    // Sandboxes run as unprivileged uids that must reach the staged files.
    chmodSync(stateDir, 0o755);
    const server = await startServer(['--concurrency', '2'], { env: { AGENT_RUNNER_STATE_DIR: stateDir } });
    try {
      for (let round = 0; round < 3; round++) {
        // A template seen twice is pre-started for the next caller: the third round leaves warm sandboxes behind.
        const job = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['echo', 'job'] } });
        assert.equal((await api(server.url, 'GET', `/v1/jobs/${job.json.job_id}?wait=60`)).json.status, 'completed');
        assert.equal((await api(server.url, 'POST', '/v1/exec', { lang: 'python', code: 'print(1)' })).json.stdout, '1\n');
      }
      const session = await api(server.url, 'POST', '/v1/sessions', { lang: 'python' });
      assert.equal(session.status, 201, session.text);
      assert.equal((await api(server.url, 'POST', `/v1/sessions/${session.json.id}/exec`, { code: 'open("kept.txt", "w").write("x")' })).status, 200);
      const other = await api(server.url, 'POST', '/v1/sessions', {});
      assert.equal(other.status, 201, other.text);
      assert.ok(mountsUnder(stateDir).length > 0, 'the sandboxes have work dirs mounted under the state dir');

      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0, server.stderr());
      assert.deepEqual(mountsUnder(stateDir), [], 'no work-dir tmpfs is left mounted');
      assert.deepEqual(processesNaming(stateDir), [], 'no sandbox outlives the service');
    } finally {
      await server.stop();
      for (const mountPoint of mountsUnder(stateDir)) execFileSync('umount', ['--lazy', mountPoint]);
    }
  });
});
