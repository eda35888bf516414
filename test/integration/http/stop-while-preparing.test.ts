import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startWorker } from '../../helpers/cluster.js';
import { startPostgres } from '../../helpers/postgres.js';
import { api, startServer, waitForHealth } from '../../helpers/server.js';
import { waitUntil } from '../../helpers/wait.js';

/** The host tools a guest image build runs (guest-image.ts). */
const BUILD_TOOLS = new Set(['dpkg', 'ldd', 'tar', 'mksquashfs', 'cpio', 'gzip', 'modinfo']);

/** Living processes, with their parent and name. */
function processes(): Array<{ pid: number; ppid: number; comm: string }> {
  const found = [];
  for (const entry of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      found.push({ pid: Number(entry), comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), ppid: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) });
    } catch {
      // It exited while we looked.
    }
  }
  return found;
}

/** Every process descended from `root`. */
function descendants(root: number): Array<{ pid: number; comm: string }> {
  const all = processes();
  const found: Array<{ pid: number; comm: string }> = [];
  for (let parents = new Set([root]); parents.size > 0;) {
    const children = all.filter((process) => parents.has(process.ppid));
    found.push(...children);
    parents = new Set(children.map((child) => child.pid));
  }
  return found;
}

/**
 * Processes that belong to the state dir: its variable in their environment (the service, its
 * worker, the host tools they run) or their working directory in it (QEMU runs with an empty
 * environment, in its VM's directory).
 */
function processesOf(stateDir: string): string[] {
  return processes()
    .filter(({ pid }) => {
      try {
        if (readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`AGENT_RUNNER_STATE_DIR=${stateDir}`)) return true;
        return readlinkSync(`/proc/${pid}/cwd`).startsWith(`${stateDir}/`);
      } catch {
        return false;
      }
    })
    .map(({ pid, comm }) => `${pid} ${comm}`);
}

/** A fresh state dir with an empty microVM cache, as on a new machine. */
function newMachine(prefix: string) {
  const stateDir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(stateDir, 0o755);
  const cacheDir = join(stateDir, 'microvm-cache');
  const images = (holding: (name: string) => boolean) => (existsSync(join(cacheDir, 'images')) ? readdirSync(join(cacheDir, 'images')).filter(holding) : []);
  return {
    stateDir,
    env: { AGENT_RUNNER_STATE_DIR: stateDir, AGENT_RUNNER_BACKENDS__MICROVM__CACHE_DIR: cacheDir },
    wholeImages: () => images((name) => existsSync(join(cacheDir, 'images', name, 'complete'))),
    halfBuilt: () => images((name) => name.includes('.building-')),
  };
}

/** Resolves once a process under `root` runs one of the guest image build's host tools. */
function buildRunning(root: number): Promise<void> {
  return waitUntil(() => descendants(root).some((process) => BUILD_TOOLS.has(process.comm)), 'the guest image build runs a host tool', {
    timeoutMs: 5 * 60_000,
    seen: () => JSON.stringify(descendants(root)),
  });
}

describe('a service stopped while its microVM backend is being prepared', () => {
  it('stops the guest image build it was running, leaves no process and nothing half built, and the next start builds a whole image', { timeout: 20 * 60_000 }, async (t) => {
    const { stateDir, env, wholeImages, halfBuilt } = newMachine('stop-preparing-');
    let server = await startServer([], { env });
    try {
      await waitForHealth(server.url, (health) => health.preparing.includes('microvm'), 'the microvm backend is being prepared');
      await buildRunning(server.child.pid!);
      const signalled = performance.now();
      server.child.kill('SIGTERM');
      const code = await server.exited;
      t.diagnostic(`stopped ${((performance.now() - signalled) / 1000).toFixed(1)} s after SIGTERM, during the guest image build`);
      assert.equal(code, 0, server.stderr());
      await waitUntil(() => processesOf(stateDir).length === 0, 'no process of the stopped service is left', { seen: () => processesOf(stateDir).join(', ') });
      assert.deepEqual(wholeImages(), [], 'the build was stopped, not waited for');
      assert.deepEqual(halfBuilt(), [], 'no half-built image is left');

      server = await startServer([], { env });
      await waitForHealth(server.url, (health) => !health.preparing.includes('microvm'), 'the microvm backend is prepared again', 10 * 60_000);
      const backends = await api(server.url, 'GET', '/v1/backends');
      assert.equal(backends.json.find((backend: { kind: string }) => backend.kind === 'microvm').state, 'ready', backends.text);
      assert.equal(wholeImages().length, 1, 'the next start built a whole image');
      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0, server.stderr());
    } finally {
      await server.stop();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('`agent-runner worker` likewise: SIGTERM during its guest image build stops it, leaving no process and nothing half built', { timeout: 10 * 60_000 }, async (t) => {
    const { stateDir, env, wholeImages, halfBuilt } = newMachine('stop-preparing-worker-');
    const database = startPostgres();
    try {
      const worker = await startWorker(database.url, 1, env);
      try {
        await buildRunning(worker.child.pid!);
        const signalled = performance.now();
        worker.child.kill('SIGTERM');
        const code = await worker.exited;
        t.diagnostic(`the worker stopped ${((performance.now() - signalled) / 1000).toFixed(1)} s after SIGTERM, during the guest image build`);
        assert.equal(code, 0, worker.logs.join('\n'));
        await waitUntil(() => processesOf(stateDir).length === 0, 'no process of the stopped worker is left', { seen: () => processesOf(stateDir).join(', ') });
        assert.deepEqual(wholeImages(), [], 'the build was stopped, not waited for');
        assert.deepEqual(halfBuilt(), [], 'no half-built image is left');
      } finally {
        await worker.stop();
      }
    } finally {
      database.destroy();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
