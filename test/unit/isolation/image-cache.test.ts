import assert from 'node:assert/strict';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { claimImage, pruneImages } from '../../../src/isolation/microvm/image-cache.js';

const CURRENT = 'c'.repeat(24);
const OLD = 'a'.repeat(24);
const OTHER = 'b'.repeat(24);
/** A pid no process has (above the kernel's pid_max). */
const DEAD_PID = 2 ** 22 + 1;

/** A cache as the microvm backend leaves it: each image with its accelerator choice and a snapshot. */
function cacheWith(...ids: string[]): string {
  const cache = mkdtempSync(join(tmpdir(), 'image-cache-'));
  for (const id of ids) {
    mkdirSync(join(cache, 'images', id), { recursive: true });
    writeFileSync(join(cache, 'images', id, 'complete'), '');
    writeFileSync(join(cache, 'images', `${id}.accel.json`), '{}');
    mkdirSync(join(cache, 'snapshots', `${id}-1024m-1cpu-tcg`), { recursive: true });
    writeFileSync(join(cache, 'snapshots', `${id}-1024m-1cpu-tcg`, 'memory'), '');
  }
  return cache;
}
const listed = (cache: string) => ({ images: readdirSync(join(cache, 'images')).sort(), snapshots: readdirSync(join(cache, 'snapshots')).sort() });

describe('the microVM image cache', () => {
  const caches: string[] = [];
  const cache = (...ids: string[]) => caches[caches.push(cacheWith(...ids)) - 1]!;
  after(() => caches.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  it('removes the images no process claims, with their snapshots and accelerator choice, never the current one', async () => {
    const dir = cache(CURRENT, OLD, OTHER);
    assert.deepEqual((await pruneImages(dir, CURRENT)).sort(), [OLD, OTHER]);
    assert.deepEqual(listed(dir), { images: [CURRENT, `${CURRENT}.accel.json`], snapshots: [`${CURRENT}-1024m-1cpu-tcg`] });
  });

  it('keeps an image a living process claims, until it releases it', async () => {
    const dir = cache(CURRENT, OLD);
    const release = await claimImage(join(dir, 'images'), OLD);
    assert.deepEqual(await pruneImages(dir, CURRENT), []);
    assert.ok(existsSync(join(dir, 'images', OLD, 'complete')));
    assert.ok(existsSync(join(dir, 'snapshots', `${OLD}-1024m-1cpu-tcg`, 'memory')));
    await release();
    assert.deepEqual(await pruneImages(dir, CURRENT), [OLD]);
  });

  it("counts two claims of one process apart, and a dead process's claim as none", async () => {
    const dir = cache(CURRENT, OLD);
    const [first, second] = [await claimImage(join(dir, 'images'), OLD), await claimImage(join(dir, 'images'), OLD)];
    await first();
    assert.deepEqual(await pruneImages(dir, CURRENT), [], 'the second claim still holds it');
    await second();
    writeFileSync(join(dir, 'images', `${OLD}.users`, `${DEAD_PID}.12345-0a0b0c0d`), '');
    assert.deepEqual(await pruneImages(dir, CURRENT), [OLD]);
    assert.ok(!existsSync(join(dir, 'images', `${OLD}.users`)));
  });

  it("removes the claims of processes that died before their image was whole, keeping a living one's", async () => {
    const dir = cache(CURRENT);
    mkdirSync(join(dir, 'images', `${OLD}.users`));
    writeFileSync(join(dir, 'images', `${OLD}.users`, `${DEAD_PID}.12345-0a0b0c0d`), '');
    const release = await claimImage(join(dir, 'images'), OTHER);
    await pruneImages(dir, CURRENT);
    assert.deepEqual(listed(dir).images, [`${OTHER}.users`, CURRENT, `${CURRENT}.accel.json`]);
    await release();
    await pruneImages(dir, CURRENT);
    assert.deepEqual(listed(dir).images, [CURRENT, `${CURRENT}.accel.json`]);
  });

  it("removes an accelerator choice whose image is gone, keeping the current image's and a claimed one's", async () => {
    const dir = cache(CURRENT);
    writeFileSync(join(dir, 'images', `${OLD}.accel.json`), '{}');
    writeFileSync(join(dir, 'images', `${OTHER}.accel.json`), '{}');
    const release = await claimImage(join(dir, 'images'), OTHER);
    await pruneImages(dir, CURRENT);
    assert.deepEqual(listed(dir).images, [`${OTHER}.accel.json`, `${OTHER}.users`, CURRENT, `${CURRENT}.accel.json`]);
    await release();
    await pruneImages(dir, CURRENT);
    assert.deepEqual(listed(dir).images, [CURRENT, `${CURRENT}.accel.json`]);
  });

  it('keeps an image a process has open though it holds no claim (a release before claims, with a VM running)', async () => {
    const dir = cache(CURRENT, OLD);
    const memory = openSync(join(dir, 'snapshots', `${OLD}-1024m-1cpu-tcg`, 'memory'), 'r');
    try {
      assert.deepEqual(await pruneImages(dir, CURRENT), []);
    } finally {
      closeSync(memory);
    }
    assert.deepEqual(await pruneImages(dir, CURRENT), [OLD]);
  });

  it('removes snapshots left without their image (a pruner died between the two), not those of the current image', async () => {
    const dir = cache(CURRENT, OLD);
    rmSync(join(dir, 'images', OLD), { recursive: true });
    await pruneImages(dir, CURRENT);
    assert.deepEqual(listed(dir).snapshots, [`${CURRENT}-1024m-1cpu-tcg`]);
  });

  it('reaps what dead builders left half made, not what a living one is making', async () => {
    const dir = cache(CURRENT);
    const dead = [join('images', `${OLD}.building-${DEAD_PID}`), join('snapshots', `${CURRENT}-1024m-1cpu-tcg.${DEAD_PID}-0a0b0c0d0e0f`)];
    const live = [join('images', `${OTHER}.building-${process.pid}`), join('snapshots', `${CURRENT}-1024m-1cpu-kvm.${process.pid}-0a0b0c0d0e0f`)];
    for (const path of [...dead, ...live]) mkdirSync(join(dir, path), { recursive: true });
    await pruneImages(dir, CURRENT);
    for (const path of dead) assert.ok(!existsSync(join(dir, path)), path);
    for (const path of live) assert.ok(existsSync(join(dir, path)), path);
  });
});
