import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { api, startServer, type ServerProcess } from '../../helpers/server.js';

const MiB = 1024 * 1024;
const notRoot = process.getuid?.() !== 0 && 'a size-limited work dir needs root';

// Files of 8 MiB: one file is bounded by RLIMIT_FSIZE (the session's largest file) on its own.
const FILL = `import os
os.mkdir("fill")
written = 0
try:
    for n in range(100000):
        with open(f"fill/{n}", "wb", buffering=0) as f:
            for _ in range(8):
                written += f.write(b"0" * (1 << 20))
except OSError as error:
    print("errno", error.errno, "after", written // (1 << 20), "MiB")
`;
const FULL = /^errno 28 after (\d+) MiB\n$/;

/**
 * Work dirs are ext4 images on the host's disk (scratch-disk.ts, work-dir-pool.ts). What a job or
 * a session wrote there must be the host's again once it is over: the pool keeps the images
 * mounted, so an image that kept its blocks would hold the host's disk for jobs long gone.
 * Each server gets a state dir of its own, so its images are the only ones counted.
 */
async function serverWithOwnImages(env: NodeJS.ProcessEnv): Promise<{ server: ServerProcess; allocatedBytes: () => number; stop: () => Promise<void> }> {
  const stateDir = mkdtempSync(join(tmpdir(), 'state-'));
  // The sandbox's uid passes through it to the files staged for its jobs.
  chmodSync(stateDir, 0o755);
  const server = await startServer([], { env: { AGENT_RUNNER_STATE_DIR: stateDir, ...env } });
  const workDirs = join(stateDir, 'runtime', 'workdirs');
  return {
    server,
    // The blocks the images hold on the host's disk, not their (sparse) size.
    allocatedBytes: () =>
      readdirSync(workDirs)
        .filter((name) => name.endsWith('.img'))
        .reduce((sum, name) => sum + statSync(join(workDirs, name)).blocks * 512, 0),
    // SIGTERM: the service unmounts its work dirs (test/integration/http/shutdown.test.ts), then its state dir can go.
    async stop() {
      server.child.kill('SIGTERM');
      await server.exited;
      await server.stop();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

/** What an empty work dir's image holds: ext4's own metadata, well under this for the sizes here. */
const EMPTY_IMAGE_BYTES = 16 * MiB;

describe('work dirs on the host disk', { skip: notRoot }, () => {
  it('a run job that filled its work dir has given the blocks back to the host when it is reported ended', async () => {
    const { server, allocatedBytes, stop } = await serverWithOwnImages({ AGENT_RUNNER_RUN_JOB__WORK_DIR_BYTES: String(512 * MiB) });
    try {
      const submitted = await api(server.url, 'POST', '/v1/jobs', {
        policy: { allow_shell: true },
        command: { argv: ['/usr/bin/python3', '-c', FILL] },
        limits: { timeout_ms: 600_000 },
      });
      assert.equal(submitted.status, 202, submitted.text);
      const ended = await api(server.url, 'GET', `/v1/jobs/${submitted.json.job_id}?wait=300`);
      assert.equal(ended.json.status, 'completed', ended.text);
      const filled = FULL.exec(ended.json.result.stdout.text);
      assert.ok(filled && Number(filled[1]) > 400, ended.json.result.stdout.text);
      // Read at once: the job is over, so what it wrote is gone from the host's disk already.
      const held = allocatedBytes();
      assert.ok(held < EMPTY_IMAGE_BYTES, `the work dir images still hold ${Math.round(held / MiB)} MiB after the job that wrote ${filled[1]} MiB ended`);
    } finally {
      await stop();
    }
  });

  // The work dir is larger than the session's memory: filling it must answer ENOSPC, not
  // spend the memory and end the session in an OOM kill.
  it('a full session work dir answers ENOSPC in the cell, the session lives on, and its blocks are the host’s again once it ends', async () => {
    const { server, allocatedBytes, stop } = await serverWithOwnImages({ AGENT_RUNNER_SESSIONS__WORK_DIR_BYTES: String(256 * MiB) });
    try {
      const session = await api(server.url, 'POST', '/v1/sessions', { lang: 'python', limits: { memory_bytes: 128 * MiB } });
      assert.equal(session.status, 201, session.text);
      const filled = await api(server.url, 'POST', `/v1/sessions/${session.json.id}/exec`, { code: FILL, timeout: 120 });
      assert.equal(filled.status, 200, filled.text);
      const answer = FULL.exec(filled.json.stdout);
      assert.ok(answer, filled.text);
      assert.ok(Number(answer[1]) > 128, `the work dir held more than the session's memory (${answer[1]} MiB)`);
      assert.equal(filled.json.session_ended, false, filled.text);

      const next = await api(server.url, 'POST', `/v1/sessions/${session.json.id}/exec`, { code: 'import shutil\nshutil.rmtree("fill")\nprint(written > 0)' });
      assert.equal(next.json.stdout, 'True\n', next.text);
      assert.equal((await api(server.url, 'GET', `/v1/sessions/${session.json.id}`)).json.state, 'running');
      // Deleted in the session: its file system gives the blocks back at once (`discard`).
      assert.ok(allocatedBytes() < EMPTY_IMAGE_BYTES, `${Math.round(allocatedBytes() / MiB)} MiB held after the cell deleted what it wrote`);

      const refilled = await api(server.url, 'POST', `/v1/sessions/${session.json.id}/exec`, { code: FILL, timeout: 120 });
      assert.match(refilled.json.stdout, FULL, refilled.text);
      const ended = await api(server.url, 'DELETE', `/v1/sessions/${session.json.id}`);
      assert.equal(ended.json.state, 'ended', ended.text);
      const held = allocatedBytes();
      assert.ok(held < EMPTY_IMAGE_BYTES, `the work dir images still hold ${Math.round(held / MiB)} MiB after the full session ended`);
    } finally {
      await stop();
    }
  });
});
