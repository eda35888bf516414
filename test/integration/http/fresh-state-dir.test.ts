import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { chmodSync, lstatSync, mkdtempSync, readdirSync, readFileSync, type Dirent } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { api, startServer } from '../../helpers/server.js';

const MiB = 1024 * 1024;

function mountPoints(): Set<string> {
  return new Set(
    readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((line) => line.split(' ')[4] ?? ''),
  );
}

/**
 * Bytes of the files stored under `dir`, not of what is mounted there (a bind shows the install it
 * binds). A job's work dir may be removed while this walks it (the snippet just ended): what is gone
 * by the time it is read is not stored.
 */
function storedBytes(dir: string, mounts = mountPoints()): number {
  let bytes = 0;
  for (const entry of readdirIfThere(dir)) {
    const path = join(dir, entry.name);
    if (mounts.has(path)) continue;
    bytes += entry.isDirectory() ? storedBytes(path, mounts) : (lstatSync(path, { throwIfNoEntry: false })?.size ?? 0);
  }
  return bytes;
}

function readdirIfThere(dir: string): Dirent[] {
  try {
    return readdirSync(dir, { withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

describe('a fresh state dir', () => {
  it('holds no copy of a toolchain installed under a private home, and rust snippets still run; nothing stays mounted after SIGTERM', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'fresh-state-'));
    // Sandboxes run as unprivileged uids that must reach the staged files.
    chmodSync(stateDir, 0o755);
    const server = await startServer([], { env: { AGENT_RUNNER_STATE_DIR: stateDir } });
    try {
      // Lists every language: each toolchain is resolved.
      const runtimes = await api(server.url, 'GET', '/v1/runtimes');
      assert.equal(runtimes.status, 200);
      assert.ok(storedBytes(stateDir) < 50 * MiB, `the state dir holds ${storedBytes(stateDir)} bytes after start`);

      // Code no other test compiles: the compile cache has nothing for it.
      const tag = randomUUID();
      const ran = await api(server.url, 'POST', '/v1/exec', { lang: 'rust', code: `fn main() { println!("{}", "${tag}"); }\n`, timeout: 120 });
      assert.equal(ran.status, 200, ran.text);
      assert.equal(ran.json.stdout, `${tag}\n`, ran.text);
      assert.ok(storedBytes(stateDir) < 50 * MiB, `the state dir holds ${storedBytes(stateDir)} bytes after a rust snippet`);

      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0, server.stderr());
      assert.deepEqual(
        [...mountPoints()].filter((mountPoint) => mountPoint.startsWith(`${stateDir}/`)),
        [],
      );
    } finally {
      await server.stop();
    }
  });
});
