import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Sandbox } from 'e2b';
import { blobPath, layerOf, layerOfTar, tarOf, writeLayout, type Layer, type LayerEntry, type OciImage } from './oci-layout.js';

/**
 * Images for the tests of templates from images, each written as an OCI layout under a directory
 * the test gives (and removes); pushImage, dockerArchive and ociArchive (oci-layout.ts) put one in a
 * registry or an upload. Every fixture is made of this host's files and fixed bytes: the same on
 * every run, so its digests are too.
 */

const NAMESPACE = 'agent-runner-test';
const TAG = 'latest';

/** The busybox image's account: a test can expect this user, uid and home. */
export const BUSYBOX_USER = { name: 'user', uid: 1000, gid: 1000, home: '/home/user' } as const;
/** The busybox image's service account, a system uid as Debian's _apt (42) is, owning its home. */
export const BUSYBOX_SERVICE = { name: 'service', uid: 42, gid: 42, home: '/var/lib/service' } as const;

let busybox: Promise<Layer> | undefined;

/**
 * A small root of this host's static busybox: /bin/busybox and every applet it lists as a symlink
 * beside it, /etc/passwd and /etc/group with root and BUSYBOX_USER, the user's home and /tmp
 * (1777). No libc, no python: a shell and coreutils only. Built once per process (other images
 * start from it).
 */
export function busyboxLayer(): Promise<Layer> {
  busybox ??= layerOf(busyboxEntries());
  return busybox;
}

function busyboxEntries(): LayerEntry[] {
  const { name, uid, gid, home } = BUSYBOX_USER;
  const service = BUSYBOX_SERVICE;
  const applets = execFileSync('/bin/busybox', ['--list'], { encoding: 'utf8' })
    .split('\n')
    .filter((applet) => applet && applet !== 'busybox');
  return [
    { name: 'bin', type: 'directory' },
    { name: 'bin/busybox', mode: 0o755, content: readFileSync('/bin/busybox') },
    ...applets.map((applet): LayerEntry => ({ name: `bin/${applet}`, type: 'symlink', linkname: 'busybox' })),
    { name: 'etc', type: 'directory' },
    {
      name: 'etc/passwd',
      content: `root:x:0:0:root:/root:/bin/sh\n${service.name}:x:${service.uid}:${service.gid}:${service.name}:${service.home}:/bin/sh\n${name}:x:${uid}:${gid}:${name}:${home}:/bin/sh\n`,
    },
    { name: 'etc/group', content: `root:x:0:\n${service.name}:x:${service.gid}:\n${name}:x:${gid}:\n` },
    { name: 'home', type: 'directory' },
    { name: home.slice(1), type: 'directory', uid, gid },
    { name: 'var', type: 'directory' },
    { name: 'var/lib', type: 'directory' },
    { name: service.home.slice(1), type: 'directory', uid: service.uid, gid: service.gid },
    { name: 'root', type: 'directory', mode: 0o700 },
    { name: 'tmp', type: 'directory', mode: 0o1777 },
  ];
}

/** The busybox image's run config: what a template from it runs, as whom and where. */
export const BUSYBOX_CONFIG = {
  Env: ['PATH=/usr/local/bin:/usr/bin:/bin', `HOME=${BUSYBOX_USER.home}`],
  Cmd: ['/bin/sh'],
  WorkingDir: BUSYBOX_USER.home,
  User: BUSYBOX_USER.name,
};

export async function busyboxImage(dir: string): Promise<OciImage> {
  return writeLayout(join(dir, 'busybox'), `${NAMESPACE}/busybox`, TAG, [{ layers: [await busyboxLayer()], config: BUSYBOX_CONFIG }]);
}

/**
 * What layeredImage's three layers leave, paths as in a tar (no leading slash): each names one
 * thing an unpacker must get right.
 */
export const LAYERED = {
  /** A file of layer 1, whited out (`.wh.gone.txt`) in layer 2. */
  deleted: 'data/gone.txt',
  /** A directory with `before` in layer 1, made opaque (`.wh..wh..opq`) in layer 2 with `after`: only `after` is left. */
  opaque: { dir: 'data/opaque', before: ['a', 'b'], after: ['c'] },
  /** `name` is a hard link (in the same layer) to `target`. */
  hardLink: { name: 'data/hard-link', target: 'data/hard-original' },
  relativeSymlink: { name: 'data/relative-link', target: '../etc/hostname' },
  /** Absolute, to a file inside the image: resolved against the image's root, not the host's. */
  absoluteSymlink: { name: 'data/absolute-link', target: '/etc/hostname' },
  /** Mode 04755, owned by root. */
  setuid: 'usr/bin/setuid-tool',
  /** Owned by 1000:1000. */
  userOwned: 'home/user/owned.txt',
  /** A directory (holding `inner`) in layer 1, a file with `content` in layer 3. */
  replacedDir: { name: 'data/replaced', inner: 'inner', content: 'a file now\n' },
  /** Names no ustar header holds: tar-stream writes a pax header (path=) for each. */
  paxNames: [`data/${'long-name-'.repeat(12)}end.txt`, 'data/ünïcödé-名前.txt'],
  /** Zero bytes. */
  empty: 'data/empty',
  /** 0755, and beside it a 0644 file. */
  executable: 'usr/bin/tool',
  notExecutable: 'data/plain.txt',
} as const;

/** Three layers exercising what an unpacker must apply (LAYERED says what each is). */
export async function layeredImage(dir: string): Promise<OciImage> {
  const { opaque, replacedDir } = LAYERED;
  const script = '#!/bin/sh\necho tool\n';
  const first: LayerEntry[] = [
    { name: 'etc', type: 'directory' },
    { name: 'etc/hostname', content: 'layered\n' },
    { name: 'data', type: 'directory' },
    { name: LAYERED.deleted, content: 'deleted in layer 2\n' },
    { name: opaque.dir, type: 'directory' },
    ...opaque.before.map((name) => ({ name: `${opaque.dir}/${name}`, content: `${name} of layer 1\n` })),
    { name: replacedDir.name, type: 'directory' },
    { name: `${replacedDir.name}/${replacedDir.inner}`, content: 'inside the directory\n' },
    { name: LAYERED.hardLink.target, content: 'one inode, two names\n' },
    { name: LAYERED.hardLink.name, type: 'link', linkname: LAYERED.hardLink.target },
    { name: LAYERED.relativeSymlink.name, type: 'symlink', linkname: LAYERED.relativeSymlink.target },
    { name: LAYERED.absoluteSymlink.name, type: 'symlink', linkname: LAYERED.absoluteSymlink.target },
    { name: LAYERED.empty },
    { name: LAYERED.notExecutable, content: 'not executable\n' },
    { name: 'usr', type: 'directory' },
    { name: 'usr/bin', type: 'directory' },
    { name: LAYERED.executable, mode: 0o755, content: script },
    { name: LAYERED.setuid, mode: 0o4755, uid: 0, gid: 0, content: script },
    { name: 'home', type: 'directory' },
    { name: 'home/user', type: 'directory', uid: 1000, gid: 1000 },
    { name: LAYERED.userOwned, uid: 1000, gid: 1000, content: 'owned by user\n' },
  ];
  const second: LayerEntry[] = [
    { name: 'data', type: 'directory' },
    { name: whiteout(LAYERED.deleted) },
    { name: opaque.dir, type: 'directory' },
    { name: `${opaque.dir}/.wh..wh..opq` },
    ...opaque.after.map((name) => ({ name: `${opaque.dir}/${name}`, content: `${name} of layer 2\n` })),
  ];
  const third: LayerEntry[] = [
    { name: 'data', type: 'directory' },
    { name: replacedDir.name, content: replacedDir.content },
    ...LAYERED.paxNames.map((name) => ({ name, content: 'a name only pax can hold\n' })),
  ];
  const layers = await Promise.all([first, second, third].map(layerOf));
  return writeLayout(join(dir, 'layered'), `${NAMESPACE}/layered`, TAG, [{ layers, config: { Cmd: ['/usr/bin/tool'] } }]);
}

/** The whiteout of `path`: `.wh.` before its last component. */
function whiteout(path: string): string {
  const slash = path.lastIndexOf('/');
  return `${path.slice(0, slash + 1)}.wh.${path.slice(slash + 1)}`;
}

/** The size of the one file of hostileLayers' `huge`: far above a small maxImageBytes, some 64 KiB gzip'ed. */
export const HUGE_BYTES = 64 * 1024 * 1024;

/**
 * The one bad thing of each of hostileLayers' one-layer images, in its image's name
 * (`agent-runner-test/hostile-NAME`); made when asked for, as `huge` holds its 64 MiB.
 */
function hostileEntries() {
  return {
    /** An entry named `../escape`. */
    dotdot: [{ name: '../escape', content: 'outside the root\n' }],
    /** An entry named with a leading slash (tar-stream writes a name as given). */
    absolute: [{ name: '/etc/escape', content: 'absolute\n' }],
    /** `link -> /`, then a file written through it. */
    'symlink-escape': [
      { name: 'link', type: 'symlink', linkname: '/' },
      { name: 'link/etc/x', content: 'through the link\n' },
    ],
    /** A hard link to a file outside the root. */
    'hardlink-outside': [{ name: 'passwd', type: 'link', linkname: '../../etc/passwd' }],
    /** A character device (1:3, /dev/null's numbers) and a block device (8:0, the first disk's). */
    device: [
      { name: 'null', type: 'character-device', mode: 0o666, devmajor: 1, devminor: 3 },
      { name: 'disk', type: 'block-device', mode: 0o660, devmajor: 8, devminor: 0 },
    ],
    fifo: [{ name: 'pipe', type: 'fifo' }],
    /** HUGE_BYTES of zeros in one file: a gzip-bomb-like layer, small to pull, big to unpack. */
    huge: [{ name: 'zeros', content: Buffer.alloc(HUGE_BYTES) }],
  } satisfies Record<string, LayerEntry[]>;
}

export type HostileName = keyof ReturnType<typeof hostileEntries> | 'bad-digest';

/**
 * One image per HostileName. `bad-digest` is a good one-layer image whose layer blob, in its layout
 * and in a registry it was pushed to (pushImage), holds other bytes of the same length (another
 * valid tar.gz): what a registry or mirror that serves the wrong content gives, caught only by
 * checking the digest.
 */
export async function hostileLayers(dir: string): Promise<Record<HostileName, OciImage>> {
  const write = (name: HostileName, layer: Layer) => writeLayout(join(dir, `hostile-${name}`), `${NAMESPACE}/hostile-${name}`, TAG, [{ layers: [layer] }]);
  const images = {} as Record<HostileName, OciImage>;
  for (const [name, entries] of Object.entries(hostileEntries()) as [Exclude<HostileName, 'bad-digest'>, LayerEntry[]][]) images[name] = write(name, await layerOf(entries));
  // Stored (gzip level 0), so that the two blobs' lengths depend on their tars' alone, which are equal.
  const [original, served] = await Promise.all(['good\n', 'evil\n'].map(async (content) => layerOfTar(await tarOf([{ name: 'hello.txt', content }]), 0)));
  const badDigest = write('bad-digest', original!);
  writeFileSync(blobPath(badDigest.layoutDir, original!.digest), served!.blob);
  images['bad-digest'] = { ...badDigest, corruptBlob: { digest: original!.digest, original: original!.blob, served: served!.blob } };
  return images;
}

/**
 * An image index of two platforms: linux/amd64, the busybox image, and linux/arm64, an image of
 * its own (one file, /arch), so that a client that picks the wrong one is seen to.
 */
export async function multiArchImage(dir: string): Promise<OciImage> {
  const arm64 = await layerOf([{ name: 'arch', content: 'arm64\n' }]);
  return writeLayout(join(dir, 'multi-arch'), `${NAMESPACE}/multi-arch`, TAG, [
    { layers: [await busyboxLayer()], config: BUSYBOX_CONFIG },
    { layers: [arm64], architecture: 'arm64', config: { Cmd: ['/bin/cat', '/arch'] } },
  ]);
}

/** Asserts that a sandbox on layeredImage sees it as the image says (read through its agent: the image has no shell). */
export async function assertLayeredAsImageSays(sandbox: Sandbox): Promise<void> {
  const names = async (path: string) => (await sandbox.files.list(`/${path}`)).map((entry) => entry.name).sort();
  assert.equal(await sandbox.files.exists(`/${LAYERED.deleted}`), false);
  assert.deepEqual(await names(LAYERED.opaque.dir), [...LAYERED.opaque.after]);
  assert.equal(await sandbox.files.read(`/${LAYERED.absoluteSymlink.name}`), 'layered\n');
  assert.equal(await sandbox.files.read(`/${LAYERED.replacedDir.name}`), LAYERED.replacedDir.content);
  const setuid = await sandbox.files.getInfo(`/${LAYERED.setuid}`);
  assert.deepEqual([setuid.owner, setuid.permissions], ['root', '-rwsr-xr-x']);
  assert.equal((await sandbox.files.getInfo(`/${LAYERED.userOwned}`)).owner, 'user');
  for (const name of LAYERED.paxNames) assert.equal(await sandbox.files.exists(`/${name}`), true, name);
}
