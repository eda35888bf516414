import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { createServer as createHttpServer, request as httpRequest, type Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CodedError } from '../../../src/contract/errors.js';
import { storeImageArchive } from '../../../src/images/image-archive.js';
import { parseImageReference } from '../../../src/images/image-reference.js';
import { ImageStore, type StoredImage } from '../../../src/images/image-store.js';
import type { RegistryOptions } from '../../../src/images/registry-client.js';
import { BUSYBOX_CONFIG, busyboxImage, busyboxLayer, HUGE_BYTES, hostileLayers, LAYERED, layeredImage, multiArchImage, type HostileName } from '../../helpers/oci-images.js';
import { dockerArchive, layerOf, ociArchive, pushImage, writeLayout, type OciImage } from '../../helpers/oci-layout.js';
import { startRegistry, type Registry } from '../../helpers/oci-registry.js';
import { waitUntil } from '../../helpers/wait.js';

/**
 * The image store against Debian's docker-registry on loopback, with images the tests make
 * (test/helpers/oci-images.ts): pulls with each kind of auth, an index resolved for linux/amd64,
 * archives, the layers' contents as overlayfs will read them, and every bad layer refused with
 * its code and nothing of it kept.
 */
const dir = mkdtempSync(join(tmpdir(), 'image-store-'));
const registries: Registry[] = [];
let open: Registry;
let busybox: OciImage;
let layered: OciImage;
let hostile: Record<HostileName, OciImage>;
const anonymous: RegistryOptions = { credentials: {}, insecureRegistries: [], timeoutMs: 30_000 };
const LIMITS = { maxImageBytes: 1 << 30, maxEntries: 100_000 };

before(async () => {
  const start = (auth: 'none' | 'basic' | 'token') => startRegistry({ auth }).then((registry) => (registries.push(registry), registry));
  [open, busybox, layered, hostile] = await Promise.all([start('none'), busyboxImage(dir), layeredImage(dir), hostileLayers(dir)]);
  for (const image of [busybox, layered, ...Object.values(hostile)]) await pushImage(image, open);
});
after(async () => {
  await Promise.all(registries.map((registry) => registry.stop()));
  rmSync(dir, { recursive: true, force: true });
});

const storeIn = (name: string, limits = LIMITS) => new ImageStore(join(dir, 'stores', name), limits);
const reference = (registry: Registry, image: OciImage) => parseImageReference(`${registry.host}/${image.name}:${image.tag}`);
const codeOf = async (promise: Promise<unknown>): Promise<string> => {
  const error = await promise.then(
    () => assert.fail('expected a refusal'),
    (failure: unknown) => failure,
  );
  assert.ok(error instanceof CodedError, String(error));
  return error.code;
};
/** The store holds no layer, no image and nothing in its staging dir. */
const assertEmpty = (store: ImageStore) => {
  for (const sub of ['layers', 'images', 'staging']) assert.deepEqual(readdirSync(join(store.root, sub)), [], sub);
};

describe('pulls', () => {
  it('pulls an image from a registry without auth; its layer is unpacked once under its diff id, root-only', async () => {
    const store = storeIn('open');
    const image = await store.pull(reference(open, busybox), anonymous);
    assert.equal(image.digest, busybox.digest);
    assert.deepEqual(image.config.cmd, ['/bin/sh']);
    const [tree] = store.layerTrees(image);
    assert.ok(statSync(join(tree!, 'bin/busybox')).isFile());
    assert.equal(readlinkSync(join(tree!, 'bin/sh')), 'busybox');
    assert.equal(statSync(store.root).mode & 0o777, 0o700);
    assert.deepEqual(
      store.images().map((stored) => stored.digest),
      [busybox.digest],
    );
    // A second pull finds the layer there: the same tree, not unpacked again.
    const inode = statSync(join(tree!, 'bin/busybox')).ino;
    await store.pull(reference(open, busybox), anonymous);
    assert.equal(statSync(join(tree!, 'bin/busybox')).ino, inode);
  });

  for (const auth of ['basic', 'token'] as const) {
    it(`pulls with ${auth} auth when the registry's credentials are configured, and is refused without them`, async () => {
      const registry = await startRegistry({ auth });
      registries.push(registry);
      await pushImage(busybox, registry);
      assert.equal(await codeOf(storeIn(`${auth}-none`).pull(reference(registry, busybox), anonymous)), 'image.registry_denied');
      const wrong = { ...anonymous, credentials: { [registry.host]: { username: registry.credentials!.username, password: 'wrong' } } };
      assert.equal(await codeOf(storeIn(`${auth}-wrong`).pull(reference(registry, busybox), wrong)), 'image.registry_denied');
      const image = await storeIn(auth).pull(reference(registry, busybox), { ...anonymous, credentials: { [registry.host]: registry.credentials! } });
      assert.equal(image.digest, busybox.digest);
    });
  }

  it('resolves an index for linux/amd64', async () => {
    const multiArch = await multiArchImage(dir);
    await pushImage(multiArch, open);
    const store = storeIn('multi');
    const image = await store.pull(reference(open, multiArch), anonymous);
    const [tree] = store.layerTrees(image);
    assert.ok(existsSync(join(tree!, 'bin/busybox')));
    assert.ok(!existsSync(join(tree!, 'arch')), 'the arm64 image is not the one pulled');
  });

  it('answers a missing repository or tag not_found, and a registry that stalls registry_failed by its deadline', async () => {
    assert.equal(await codeOf(storeIn('missing').pull(parseImageReference(`${open.host}/agent-runner-test/none:latest`), anonymous)), 'image.not_found');
    assert.equal(await codeOf(storeIn('missing').pull(parseImageReference(`${open.host}/${busybox.name}:no-such-tag`), anonymous)), 'image.not_found');
    const stalled = await stallingServer();
    try {
      const port = (stalled.address() as { port: number }).port;
      const error = await storeIn('stalled')
        .pull(parseImageReference(`127.0.0.1:${port}/any/image:tag`), { ...anonymous, timeoutMs: 200 })
        .catch((failure: unknown) => failure);
      assert.ok(error instanceof CodedError && error.code === 'image.registry_failed', String(error));
      assert.match(error.message, /made no progress for 200 ms/);
    } finally {
      stalled.close();
    }
  });
});

describe('layers as overlayfs reads them', () => {
  let store: ImageStore;
  let image: StoredImage;
  let trees: string[];
  before(async () => {
    store = storeIn('layered');
    image = await store.pull(reference(open, layered), anonymous);
    trees = store.layerTrees(image);
  });

  it('keeps each layer apart, whiteouts as 0/0 devices and opaque directories marked', () => {
    assert.equal(trees.length, 3);
    const whiteout = lstatSync(join(trees[1]!, LAYERED.deleted));
    assert.ok(whiteout.isCharacterDevice() && whiteout.rdev === 0, 'a whiteout is a 0/0 character device');
    assert.deepEqual(readdirSync(join(trees[1]!, LAYERED.opaque.dir)), LAYERED.opaque.after);
    // The opaque mark is an xattr: read by the kernel, shown here by getfattr where it is installed.
    assert.ok(existsSync(join(trees[0]!, LAYERED.opaque.dir, LAYERED.opaque.before[0]!)));
  });

  it('keeps owners, modes (setuid too), links, times and pax names as the image has them', () => {
    const [first, , third] = trees as [string, string, string];
    const setuid = statSync(join(first, LAYERED.setuid));
    assert.equal(setuid.mode & 0o7777, 0o4755);
    assert.equal(setuid.uid, 0);
    assert.equal(statSync(join(first, LAYERED.userOwned)).uid, 1000);
    assert.equal(statSync(join(first, LAYERED.hardLink.name)).ino, statSync(join(first, LAYERED.hardLink.target)).ino);
    assert.equal(readlinkSync(join(first, LAYERED.absoluteSymlink.name)), LAYERED.absoluteSymlink.target);
    assert.equal(readlinkSync(join(first, LAYERED.relativeSymlink.name)), LAYERED.relativeSymlink.target);
    assert.equal(statSync(join(first, LAYERED.executable)).mode & 0o777, 0o755);
    assert.equal(statSync(join(first, LAYERED.notExecutable)).mode & 0o777, 0o644);
    assert.equal(statSync(join(first, LAYERED.empty)).size, 0);
    assert.equal(readFileSync(join(third, LAYERED.replacedDir.name), 'utf8'), LAYERED.replacedDir.content);
    for (const name of LAYERED.paxNames) assert.ok(existsSync(join(third, name)), name);
  });
});

describe('bad input', () => {
  const refusals: Record<HostileName, string> = {
    dotdot: 'image.invalid',
    absolute: 'image.invalid',
    'symlink-escape': 'image.invalid',
    'hardlink-outside': 'image.invalid',
    device: 'image.invalid',
    fifo: 'image.invalid',
    huge: 'image.too_large',
    'bad-digest': 'image.digest_mismatch',
  };
  for (const [name, code] of Object.entries(refusals) as [HostileName, string][]) {
    it(`refuses the ${name} layer (${code}) and keeps nothing of it`, async () => {
      const store = storeIn(`hostile-${name}`, { ...LIMITS, maxImageBytes: HUGE_BYTES / 2 });
      const error = await store.pull(reference(open, hostile[name]), anonymous).catch((failure: unknown) => failure);
      assert.ok(error instanceof CodedError, String(error));
      assert.equal(error.code, code, error.message);
      if (code === 'image.invalid') assert.ok(typeof error.error.details?.entry === 'string', 'names the entry');
      assertEmpty(store);
      assert.ok(!existsSync(join(dir, 'escape')) && !existsSync('/etc/escape'), 'nothing written outside the store');
    });
  }

  it('refuses a hard link whose target runs through a symlink of the layer (which would link a host file)', async () => {
    const secretDir = mkdtempSync(join(dir, 'host-secret-'));
    writeFileSync(join(secretDir, 'secret'), 'host only\n', { mode: 0o600 });
    const image = writeLayout(join(dir, 'hostile-link-through-symlink'), 'agent-runner-test/hostile-link-through-symlink', 'latest', [
      {
        layers: [
          await layerOf([
            { name: 'a', type: 'symlink', linkname: secretDir },
            { name: 'stolen', type: 'link', linkname: 'a/secret' },
          ]),
        ],
      },
    ]);
    await pushImage(image, open);
    const store = storeIn('hostile-link-through-symlink');
    const error = await store.pull(reference(open, image), anonymous).catch((failure: unknown) => failure);
    assert.ok(error instanceof CodedError && error.code === 'image.invalid', String(error));
    assert.equal(error.error.details?.entry, 'stolen');
    assertEmpty(store);
    assert.equal(statSync(join(secretDir, 'secret')).nlink, 1, 'the host file has no other name');
  });

  it('leaves nothing a later pull takes for whole when killed -9 mid-pull', async () => {
    const root = join(dir, 'stores', 'killed');
    const huge = hostile.huge;
    // The registry behind a proxy that sends half of the layer and then nothing: the pull, in a
    // process of its own, is surely mid-layer (its deadline is far off) when it is killed.
    const { proxy, stalled } = await stallingProxy(open);
    try {
      const host = `127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', pullScript(root, `${host}/${huge.name}:${huge.tag}`)], { stdio: 'ignore' });
      const exited = once(child, 'exit');
      await stalled;
      await waitUntil(
        () => existsSync(join(root, 'staging')) && readdirSync(join(root, 'staging')).some((entry) => existsSync(join(root, 'staging', entry, 'tree', 'zeros'))),
        'the pull unpacks part of the layer',
      );
      child.kill('SIGKILL');
      await exited;
    } finally {
      proxy.closeAllConnections();
      proxy.close();
    }
    const store = new ImageStore(root, LIMITS);
    assertEmpty(store);
    // And a pull now stores it whole.
    const image = await store.pull(reference(open, huge), anonymous);
    assert.equal(statSync(join(store.layerTrees(image)[0]!, 'zeros')).size, HUGE_BYTES);
  });
});

describe('removal beside pulls', () => {
  it('removes no layer a pull under way takes as it is: the removal waits for the pull to record its image', async () => {
    const store = storeIn('race');
    // An image with busybox's layer and one of 1 MiB that does not compress, which the proxy stalls.
    const shared = await busyboxLayer();
    const big = await layerOf([{ name: 'noise', content: randomBytes(1 << 20) }]);
    const combo = writeLayout(join(dir, 'combo'), 'agent-runner-test/combo', 'latest', [{ layers: [shared, big], config: BUSYBOX_CONFIG }]);
    await pushImage(combo, open);
    const first = await store.pull(reference(open, busybox), anonymous);
    const { proxy, stalled, release } = await stallingProxy(open);
    try {
      const host = `127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      // busybox's layer is here already: the pull takes it as it is, and stalls on the other.
      const pulling = store.pull(parseImageReference(`${host}/${combo.name}:${combo.tag}`), anonymous);
      await stalled;
      // The only image that recorded busybox's layer goes while the pull that also holds it runs.
      const removing = store.remove(first.digest);
      release();
      const pulled = await pulling;
      await removing;
      for (const tree of store.layerTrees(pulled)) assert.ok(existsSync(tree), `${tree} is gone`);
      assert.equal(readdirSync(join(store.root, 'layers')).length, 2);
    } finally {
      proxy.closeAllConnections();
      proxy.close();
    }
  });
});

describe('archives', () => {
  it('stores docker save output and an OCI layout tar as the same layers', async () => {
    const store = storeIn('archives');
    mkdirSync(join(dir, 'archives'), { recursive: true });
    const docker = join(dir, 'archives', 'layered-docker.tar');
    const oci = join(dir, 'archives', 'layered-oci.tar');
    await dockerArchive(layered, docker);
    ociArchive(layered, oci);
    const fromDocker = await storeImageArchive(store, createReadStream(docker), 'layered-docker.tar', LIMITS.maxImageBytes);
    const fromOci = await storeImageArchive(store, createReadStream(oci), 'layered-oci.tar', LIMITS.maxImageBytes);
    assert.equal(fromOci.digest, layered.digest);
    assert.deepEqual(
      fromDocker.layers.map((layer) => layer.diffId),
      fromOci.layers.map((layer) => layer.diffId),
    );
    assert.equal(readdirSync(join(store.root, 'layers')).length, 3, 'each layer stored once');
    // Cut short: a tar that ends inside an entry.
    assert.equal(await codeOf(storeImageArchive(store, createReadStream(docker, { end: 5000 }), 'cut.tar', LIMITS.maxImageBytes)), 'image.invalid');
  });
});

/**
 * An HTTP proxy to `registry` that passes everything but a large blob (a layer, not a config),
 * of which it sends the first half and then nothing more until `release()`; `stalled` resolves
 * once it has sent that half.
 */
async function stallingProxy(registry: Registry): Promise<{ proxy: HttpServer; stalled: Promise<void>; release: () => void }> {
  const upstream = new URL(registry.url);
  let stall!: () => void;
  const stalled = new Promise<void>((resolve) => (stall = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const proxy = createHttpServer((request, response) => {
    const forward = httpRequest({ host: upstream.hostname, port: upstream.port, path: request.url, method: request.method, headers: request.headers }, (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.headers);
      const length = Number(answer.headers['content-length']);
      if (!request.url?.includes('/blobs/') || !(length > 16_384)) return void answer.pipe(response);
      const half = Math.ceil(length / 2);
      const held: Buffer[] = [];
      let sent = 0;
      answer.on('data', (chunk: Buffer) => {
        const now = chunk.subarray(0, Math.max(0, half - sent));
        if (now.length > 0) response.write(now);
        if (now.length < chunk.length) held.push(chunk.subarray(now.length));
        sent += chunk.length;
        if (sent >= half) stall();
      });
      answer.on('end', () => void released.then(() => response.end(Buffer.concat(held))));
    });
    request.pipe(forward);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return { proxy, stalled, release };
}

/** A TCP server that takes connections and never answers: a registry that stalls. */
function stallingServer(): Promise<Server> {
  const server = createServer(() => undefined);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** A pull of `ref` into the store at `root`, as a script for a process of its own. */
function pullScript(root: string, ref: string): string {
  const images = new URL('../../../src/images/', import.meta.url).pathname;
  return `
    const { ImageStore } = await import(${JSON.stringify(join(images, 'image-store.ts'))});
    const { parseImageReference } = await import(${JSON.stringify(join(images, 'image-reference.ts'))});
    await new ImageStore(${JSON.stringify(root)}, ${JSON.stringify(LIMITS)}).pull(parseImageReference(${JSON.stringify(ref)}), { credentials: {}, insecureRegistries: [], timeoutMs: 3_600_000 });
  `;
}
