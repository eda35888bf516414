import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { VolumeStore } from '../../../src/volumes/volume-store.js';

/** Whether anything is mounted at or below `dir` on this host. */
function mountedUnder(dir: string): boolean {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[1]?.startsWith(dir));
}

describe('the volume store', () => {
  const root = mkdtempSync(join(tmpdir(), 'volume-store-'));
  const store = new VolumeStore({ dir: join(root, 'volumes'), defaultBytes: 16 * 2 ** 20, maxBytes: 64 * 2 ** 20, max: 4 });
  after(async () => {
    await store.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('a mount asked for while the volume is being deleted is refused as not found, and the delete leaves nothing mounted or on disk', async () => {
    const volume = await store.create('racing', undefined, undefined);
    await store.close();
    assert.equal(mountedUnder(root), false, 'unmounted before the race starts');

    const deleting = store.delete(volume.id);
    const mounting = store.mountPath(volume.id);
    await assert.rejects(mounting, { code: 'volume.not_found' });
    await deleting;
    assert.equal(mountedUnder(root), false);
    assert.equal(existsSync(join(root, 'volumes', volume.id)), false);
  });

  it('a mount asked for before the delete is undone by it', async () => {
    const volume = await store.create('mounted-first', undefined, undefined);
    await store.close();
    const mounting = store.mountPath(volume.id);
    await store.delete(volume.id);
    await mounting;
    assert.equal(mountedUnder(root), false);
    assert.equal(existsSync(join(root, 'volumes', volume.id)), false);
  });
});
