import assert from 'node:assert/strict';
import { createReadStream, lstatSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { storeImageArchive } from '../../../src/images/image-archive.js';
import { ImageStore, type StoredImage } from '../../../src/images/image-store.js';
import { withSandboxUser } from '../../../src/templates/sandbox-user.js';
import { layerOf, ociArchive, writeLayout, type LayerEntry } from '../../helpers/oci-layout.js';

const LIMITS = { maxImageBytes: 1 << 30, maxEntries: 100_000 };

/**
 * E2B's `user` added to an image that has none (templates/sandbox-user.ts), as E2B's builds do:
 * /etc/passwd and /etc/group with it appended (theirs otherwise, owners and modes kept), its home
 * its own; nothing added to an image that names it, gives uid 1000 to an account of its own, or
 * has no /etc/passwd.
 */
describe("the sandbox's user in an image", () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-user-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const store = new ImageStore(join(dir, 'store'), LIMITS);
  let count = 0;
  const stored = async (entries: LayerEntry[]): Promise<StoredImage> => {
    const name = `image-${++count}`;
    const image = writeLayout(join(dir, name), `agent-runner-test/${name}`, 'latest', [{ layers: [await layerOf(entries)] }]);
    ociArchive(image, join(dir, `${name}.tar`));
    return storeImageArchive(store, createReadStream(join(dir, `${name}.tar`)), `${name}.tar`, LIMITS.maxImageBytes);
  };
  const etc = (passwd: string, group = 'root:x:0:\n'): LayerEntry[] => [
    { name: 'etc', type: 'directory' },
    { name: 'etc/passwd', content: passwd, mode: 0o644 },
    { name: 'etc/group', content: group, mode: 0o640, gid: 42 },
  ];
  const top = (layers: StoredImage['layers']) => store.layerTrees({ layers } as StoredImage).at(-1)!;

  it('adds the user to an image without one: its passwd and group lines, a login shell the image has, its home', async () => {
    // Debian's merged /usr: /bin is a link, bash is in /usr/bin; the passwd has no last newline.
    const image = await stored([
      ...etc('root:x:0:0:root:/root:/bin/bash'),
      { name: 'usr/bin', type: 'directory' },
      { name: 'usr/bin/bash', content: 'a shell', mode: 0o755 },
      { name: 'bin', type: 'symlink', linkname: 'usr/bin' },
    ]);
    const layers = await withSandboxUser(store, image.layers);
    assert.equal(layers.length, image.layers.length + 1);
    const tree = top(layers);
    assert.equal(readFileSync(join(tree, 'etc/passwd'), 'utf8'), 'root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n');
    assert.equal(readFileSync(join(tree, 'etc/group'), 'utf8'), 'root:x:0:\nuser:x:1000:\n');
    const group = lstatSync(join(tree, 'etc/group'));
    assert.deepEqual([group.mode & 0o7777, group.gid], [0o640, 42], "the image's owner and mode kept");
    const home = lstatSync(join(tree, 'home/user'));
    assert.ok(home.isDirectory());
    assert.deepEqual([home.uid, home.gid], [1000, 1000]);
    assert.deepEqual(await withSandboxUser(store, image.layers), layers, 'made once per image');
  });

  it('adds nothing to an image that names the user, has its own account of uid 1000, or has no /etc/passwd', async () => {
    const named = await stored([...etc('root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n'), { name: 'home', type: 'directory' }]);
    const node = await stored(etc('root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\n'));
    const none = await stored([{ name: 'bin', type: 'directory' }]);
    for (const image of [named, node, none]) assert.equal(await withSandboxUser(store, image.layers), image.layers);
  });

  it('gives a shell of /bin/sh where the image has no bash', async () => {
    const image = await stored(etc('root:x:0:0:root:/root:/bin/sh\n'));
    const tree = top(await withSandboxUser(store, image.layers));
    assert.match(readFileSync(join(tree, 'etc/passwd'), 'utf8'), /^user:x:1000:1000::\/home\/user:\/bin\/sh$/m);
  });
});
