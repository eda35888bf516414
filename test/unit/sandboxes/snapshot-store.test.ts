import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SnapshotStore, type KeptState } from '../../../src/sandboxes/snapshot-store.js';
import { processIdentity, SELF_IDENTITY } from '../../../src/util/process-identity.js';

const DAY_MS = 24 * 3600 * 1000;
const sandbox: KeptState['sandbox'] = {
  id: 'a'.repeat(24),
  template: 'base',
  backend: 'local_process',
  env_vars: {},
  metadata: {},
  internet_access: false,
  access_token: 'token',
  started_at: new Date().toISOString(),
  cpu_count: 1,
  memory_mb: 1024,
  disk_size_mb: 1024,
};

/**
 * Where paused sandboxes and snapshots are kept (sandboxes/snapshot-store.ts): a state is under
 * its id whole or not at all, and what a crash or time left behind is swept at load.
 */
describe('the kept states of sandboxes', () => {
  const dirs: string[] = [];
  const store = () => {
    const dir = mkdtempSync(join(tmpdir(), 'kept-unit-'));
    dirs.push(dir);
    return { dir, store: new SnapshotStore(join(dir, 'kept')) };
  };
  after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  it('writes a state whole, private to the service, and reads it back', async () => {
    const { dir, store: kept } = store();
    const state = await kept.write(async ({ home, memory }) => {
      await home.write(Buffer.from('tar bytes'));
      // A checkpoint's files, where a backend keeps memory: counted in the state's bytes.
      mkdirSync(join(memory, 'image'), { recursive: true });
      writeFileSync(join(memory, 'image', 'pages'), 'memory');
      return { id: 'b'.repeat(24), purpose: 'snapshot', name: 'named', kept: 'memory', created_at: new Date().toISOString(), sandbox };
    });
    assert.equal(state.bytes, 9 + 6);
    assert.equal(readFileSync(join(kept.paths(state.id).memory, 'image', 'pages'), 'utf8'), 'memory');
    assert.equal(state.pid, process.pid);
    assert.deepEqual(readdirSync(join(dir, 'kept')).sort(), ['.holders', 'b'.repeat(24)]);
    assert.equal(statSync(join(dir, 'kept')).mode & 0o777, 0o700);
    const [loaded] = await new SnapshotStore(join(dir, 'kept')).load(DAY_MS);
    assert.deepEqual(loaded, state);
    const handle = await kept.openHome(state.id);
    assert.equal((await handle.readFile()).toString(), 'tar bytes');
    await handle.close();
  });

  it('leaves nothing when filling it fails: no state, no partial directory', async () => {
    const { dir, store: kept } = store();
    await assert.rejects(
      kept.write(async () => {
        throw new Error('packing failed');
      }),
      /packing failed/,
    );
    assert.deepEqual(readdirSync(join(dir, 'kept')), ['.holders']);
  });

  it('sweeps at load what was left half done by a process that is gone, states past retention, and unreadable ones', async () => {
    const { dir, store: kept } = store();
    const old = new Date(Date.now() - 2 * DAY_MS).toISOString();
    const keep = await kept.write(async () => ({ id: 'c'.repeat(24), purpose: 'pause', name: null, kept: 'files', created_at: new Date().toISOString(), sandbox }));
    await kept.write(async () => ({ id: 'd'.repeat(24), purpose: 'snapshot', name: null, kept: 'files', created_at: old, sandbox }));
    const fork = await kept.write(async () => ({ id: 'e'.repeat(24), purpose: 'fork', name: null, kept: 'files', created_at: new Date().toISOString(), sandbox }));
    // A partial directory of this process (alive) stays; one of a pid that cannot exist goes.
    mkdirSync(join(dir, 'kept', `.partial-${process.pid}-live`));
    mkdirSync(join(dir, 'kept', '.partial-999999999-dead'));
    mkdirSync(join(dir, 'kept', 'f'.repeat(24)));
    writeFileSync(join(dir, 'kept', 'f'.repeat(24), 'state.json'), 'not json');
    const loaded = await new SnapshotStore(join(dir, 'kept')).load(DAY_MS);
    assert.deepEqual(
      loaded.map((state) => state.id),
      [keep.id],
      'a fork state of a live process is kept on disk but not loaded; the expired one is gone',
    );
    assert.deepEqual(readdirSync(join(dir, 'kept')).sort(), ['.holders', `.partial-${process.pid}-live`, keep.id, fork.id].sort());
  });

  it("is one process's: a dir another live agent-runner process holds gives nothing and takes nothing; a dead holder's claim is taken over", async () => {
    const { dir, store: kept } = store();
    await kept.write(async () => ({ id: 'f'.repeat(24), purpose: 'pause', name: null, kept: 'files', created_at: new Date().toISOString(), sandbox }));
    // Another process (a live one of another pid) holds it: this one's claim goes, its own claim stays.
    const other = spawn('/bin/sleep', ['30']);
    try {
      const otherIdentity = await waitForIdentity(other.pid!);
      rmSync(join(dir, 'kept', '.holders', SELF_IDENTITY));
      writeFileSync(join(dir, 'kept', '.holders', otherIdentity), '');
      const second = new SnapshotStore(join(dir, 'kept'));
      assert.deepEqual(await second.load(DAY_MS), [], "another process's paused sandboxes are not listed");
      await assert.rejects(
        second.write(async () => ({ id: 'g'.repeat(24), purpose: 'pause', name: null, kept: 'files', created_at: new Date().toISOString(), sandbox })),
        new RegExp(`another agent-runner process's \\(pid ${other.pid}\\)`),
      );
      assert.ok(readdirSync(join(dir, 'kept')).includes('f'.repeat(24)), 'nothing of the holder is touched');
    } finally {
      other.kill('SIGKILL');
      await new Promise((resolve) => other.once('exit', resolve));
    }
    // Its holder gone, the dir is this process's again.
    const third = new SnapshotStore(join(dir, 'kept'));
    assert.deepEqual(
      (await third.load(DAY_MS)).map((state) => state.id),
      ['f'.repeat(24)],
    );
  });
});

/** A child's identity once /proc shows it (its start time is known at once). */
async function waitForIdentity(pid: number): Promise<string> {
  for (;;) {
    const identity = processIdentity(pid);
    if (identity !== null) return identity;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
