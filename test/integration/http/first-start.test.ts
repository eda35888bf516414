import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, closeSync, constants, existsSync, mkdtempSync, openSync, readdirSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { withSuiteSnapshots } from '../../helpers/microvm-cache.js';
import { api, startServer, waitForHealth, waitTerminal } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

const CLI = fileURLToPath(new URL('../../../dist/cli/agent-runner.js', import.meta.url));

/**
 * A microvm cache whose remembered accelerator is a FIFO: the backend's preparation blocks
 * reading it until the test writes the answer, so "still preparing" is a state the test
 * holds, not a race it hopes to win.
 */
function heldMicrovmCache(stateDir: string): { cacheDir: string; release(timeoutMs?: number): Promise<void> } {
  const cacheDir = join(stateDir, 'microvm-cache');
  const env = { ...process.env, AGENT_RUNNER_STATE_DIR: stateDir, AGENT_RUNNER_BACKENDS__MICROVM__CACHE_DIR: cacheDir };
  // Builds the guest image (and remembers an accelerator) once, as a first start would.
  execFileSync(process.execPath, [CLI, 'backends'], { env, stdio: 'ignore' });
  withSuiteSnapshots(cacheDir);
  const images = join(cacheDir, 'images');
  const remembered = readdirSync(images).find((name) => name.endsWith('.accel.json'));
  assert.ok(remembered, `no accelerator was remembered in ${images}`);
  const fifo = join(images, remembered);
  rmSync(fifo);
  execFileSync('mkfifo', [fifo]);
  let released = false;
  return {
    cacheDir,
    // Non-blocking: the open fails (ENXIO) rather than hangs while no process reads it, and is
    // tried again until the service's preparation has come to the read (under load it came
    // after the test's first try: a CI run failed with that ENXIO). A service blocked reading it
    // would never exit (its thread pool holds the blocked read).
    async release(timeoutMs = 60_000) {
      if (released) return;
      let fd = -1;
      const opened = () => {
        try {
          fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
          return true;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENXIO') return false;
          throw error;
        }
      };
      await waitUntil(opened, 'the service reads the held accelerator choice', timeoutMs);
      released = true;
      writeSync(fd, JSON.stringify({ accel: 'tcg', note: 'TCG (held by the test)' }));
      closeSync(fd);
    },
  };
}

describe('first start', () => {
  it('answers /health while a backend is still being prepared, says so, and reports it ready once prepared', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'first-start-'));
    chmodSync(stateDir, 0o755);
    const held = heldMicrovmCache(stateDir);
    const server = await startServer([], { env: { AGENT_RUNNER_STATE_DIR: stateDir, AGENT_RUNNER_BACKENDS__MICROVM__CACHE_DIR: held.cacheDir } });
    try {
      const health = await api(server.url, 'GET', '/health');
      assert.equal(health.status, 200, health.text);
      assert.ok(health.json.preparing.includes('microvm'), health.text);
      const backends = await api(server.url, 'GET', '/v1/backends');
      const microvm = backends.json.find((backend: { kind: string }) => backend.kind === 'microvm');
      assert.equal(microvm.state, 'preparing', backends.text);
      assert.equal(microvm.available, false, backends.text);

      // A job whose timeout passes while its backend is still preparing ends saying so.
      const submitted = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['true'] }, backend: { kind: 'microvm' }, limits: { timeout_ms: 500 } });
      assert.equal(submitted.status, 202, submitted.text);
      const late = await waitTerminal(server.url, submitted.json.job_id);
      assert.equal(late.status, 'backend_unavailable', JSON.stringify(late.result));
      assert.equal(late.result.error.code, 'backend.unavailable');
      assert.match(late.result.error.message, /still being prepared/);

      await held.release();
      await waitForHealth(server.url, (health) => !health.preparing.includes('microvm'), 'microvm prepared');
      const after = await api(server.url, 'GET', '/v1/backends');
      assert.equal(after.json.find((backend: { kind: string }) => backend.kind === 'microvm').state, 'ready', after.text);
    } finally {
      // A failed assertion left the preparation held: let it go, or the worker outlives the test.
      // Given up soon: a service that died reads nothing any more.
      await held.release(5_000).catch(() => undefined);
      await server.stop();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('an idle service exits 0 on SIGTERM, its worker with it', async () => {
    const server = await startServer();
    try {
      await waitForHealth(server.url, (health) => health.preparing.length === 0, 'every backend prepared', 120_000);
      const worker = execFileSync('ps', ['-o', 'pid=', '--ppid', String(server.child.pid)], { encoding: 'utf8' }).trim();
      assert.match(worker, /^\d+$/, 'one worker process runs beside the front door');
      server.child.kill('SIGTERM');
      // A hang guard, not a measure: an idle service used to make a warm VM pool on its way out.
      const code = await Promise.race([server.exited, new Promise<string>((resolve) => setTimeout(() => resolve('still running after 20 s'), 20_000).unref())]);
      assert.equal(code, 0, server.stderr());
      assert.equal(existsSync(`/proc/${worker}`), false, 'the worker process is gone');
    } finally {
      await server.stop();
    }
  });
});
