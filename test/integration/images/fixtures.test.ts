import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { extract, type Header } from 'tar-stream';
import { BUSYBOX_SERVICE, BUSYBOX_USER, busyboxImage, HUGE_BYTES, hostileLayers, LAYERED, layeredImage, multiArchImage, type HostileName } from '../../helpers/oci-images.js';
import { blobPath, dockerArchive, MEDIA_TYPES, ociArchive, pushImage, registryReference, sha256, skopeo, skopeoCreds, type OciImage } from '../../helpers/oci-layout.js';
import { PYTHON_CHECK, pythonImage } from '../../helpers/oci-python.js';
import { startRegistry, type Registry } from '../../helpers/oci-registry.js';

// The fixtures of templates from images checked by the tools that define them: docker-registry
// serves them, skopeo pulls and converts them, umoci (which applies whiteouts the way the OCI image
// spec says) unpacks them. The product's tests can then trust what a fixture claims to hold.

const ACCEPT = [MEDIA_TYPES.manifest, MEDIA_TYPES.index].join(', ');

describe('the loopback registry of the fixtures', () => {
  it('stops with nothing else keeping its process alive, the stop awaited to its end', () => {
    const script = join(fileURLToPath(new URL('../../../', import.meta.url)), 'test/fixtures/images/registry-stop.mts');
    const printed = execFileSync(process.execPath, ['--import', 'tsx', script], { encoding: 'utf8' });
    assert.equal(printed, 'stopped\n');
  });
});

describe('OCI image fixtures', () => {
  const dir = mkdtempSync(join(tmpdir(), 'oci-fixtures-'));
  const registries: Registry[] = [];
  let open: Registry;
  let basic: Registry;
  let token: Registry;
  let busybox: OciImage;
  let layered: OciImage;
  let multiArch: OciImage;
  let python: OciImage;
  let hostile: Record<HostileName, OciImage>;
  /** Every image, pushed to the registry without auth. */
  let all: OciImage[];

  before(async () => {
    // Each kept as it starts, so that `after` stops it even when another failed to.
    const start = (auth: 'none' | 'basic' | 'token') => startRegistry({ auth }).then((registry) => (registries.push(registry), registry));
    const started = Promise.all([start('none'), start('basic'), start('token')]);
    [busybox, layered, multiArch, python, hostile] = await Promise.all([busyboxImage(dir), layeredImage(dir), multiArchImage(dir), pythonImage(dir), hostileLayers(dir)]);
    [open, basic, token] = await started;
    all = [busybox, layered, multiArch, python, ...Object.values(hostile)];
    for (const image of all) await pushImage(image, open);
    for (const registry of [basic, token]) await pushImage(busybox, registry);
  });

  after(async () => {
    await Promise.all(registries.map((registry) => registry.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves every image under the digest of its layout, as skopeo inspects it', async () => {
    for (const image of all) {
      const inspected = JSON.parse(await skopeo('inspect', '--tls-verify=false', `docker://${registryReference(open, image)}`));
      assert.equal(inspected.Digest, image.digest, image.name);
      const response = await fetch(`${open.url}/v2/${image.name}/manifests/${image.tag}`, { method: 'HEAD', headers: { accept: ACCEPT } });
      assert.equal(response.headers.get('docker-content-digest'), image.digest, image.name);
    }
  });

  it('lets skopeo copy each well-formed image out to a dir, with the layers the layout holds', async () => {
    for (const image of [busybox, layered, python]) {
      const out = join(dir, `copied-${image.name.split('/')[1]}`);
      await skopeo('copy', '--src-tls-verify=false', `docker://${registryReference(open, image)}`, `dir:${out}`);
      for (const layer of manifestOf(image).layers) assert.deepEqual(readFileSync(join(out, layer.digest.split(':')[1])), readFileSync(blobPath(image.layoutDir, layer.digest)));
    }
  });

  it('builds a busybox image whose shell runs as its user, with no libc beside it', () => {
    const root = unpack(busybox);
    assert.equal(chroot(root, '/bin/sh', '-c', `id -u ${BUSYBOX_USER.name}; ls /bin/cat`), `${BUSYBOX_USER.uid}\n/bin/cat\n`);
    assert.equal(statSync(join(root, 'tmp')).mode & 0o7777, 0o1777);
    assert.equal(statSync(join(root, BUSYBOX_USER.home)).uid, BUSYBOX_USER.uid);
    assert.equal(statSync(join(root, BUSYBOX_SERVICE.home)).uid, BUSYBOX_SERVICE.uid);
    assert.deepEqual(readdirSync(root).sort(), ['bin', 'etc', 'home', 'root', 'tmp', 'var']);
    assert.equal(configOf(busybox).config.User, BUSYBOX_USER.name);
  });

  it('builds a layered image that unpacks to what LAYERED says', async () => {
    const root = unpack(layered);
    const at = (path: string) => join(root, path);
    assert.equal(lstatSync(at(LAYERED.deleted), { throwIfNoEntry: false }), undefined);
    assert.deepEqual(readdirSync(at(LAYERED.opaque.dir)), LAYERED.opaque.after);
    assert.equal(statSync(at(LAYERED.hardLink.name)).ino, statSync(at(LAYERED.hardLink.target)).ino);
    assert.equal(readlinkSync(at(LAYERED.relativeSymlink.name)), LAYERED.relativeSymlink.target);
    assert.equal(readlinkSync(at(LAYERED.absoluteSymlink.name)), LAYERED.absoluteSymlink.target);
    assert.equal(statSync(at(LAYERED.setuid)).mode & 0o7777, 0o4755);
    assert.equal(statSync(at(LAYERED.userOwned)).uid, 1000);
    assert.equal(readFileSync(at(LAYERED.replacedDir.name), 'utf8'), LAYERED.replacedDir.content);
    assert.equal(statSync(at(LAYERED.empty)).size, 0);
    assert.equal(statSync(at(LAYERED.executable)).mode & 0o777, 0o755);
    assert.equal(statSync(at(LAYERED.notExecutable)).mode & 0o777, 0o644);
    for (const name of LAYERED.paxNames) assert.ok(statSync(at(name)).isFile(), name);
    // The layers themselves hold what the unpacked tree is made of.
    const [, second, third] = await Promise.all([0, 1, 2].map((index) => layerHeaders(layered, index)));
    assert.ok(second!.some((header) => header.name.endsWith('/.wh.gone.txt')));
    assert.ok(second!.some((header) => header.name === `${LAYERED.opaque.dir}/.wh..wh..opq`));
    for (const name of LAYERED.paxNames) assert.equal((third!.find((header) => header.name === name)?.pax as Record<string, string> | undefined)?.path, name);
  });

  it('builds hostile images that each hold their one bad thing', async () => {
    const expected: Record<Exclude<HostileName, 'bad-digest'>, Partial<Header>[]> = {
      dotdot: [{ name: '../escape', type: 'file' }],
      absolute: [{ name: '/etc/escape', type: 'file' }],
      'symlink-escape': [
        { name: 'link', type: 'symlink', linkname: '/' },
        { name: 'link/etc/x', type: 'file' },
      ],
      'hardlink-outside': [{ name: 'passwd', type: 'link', linkname: '../../etc/passwd' }],
      device: [
        { name: 'null', type: 'character-device', devmajor: 1, devminor: 3 },
        { name: 'disk', type: 'block-device', devmajor: 8, devminor: 0 },
      ],
      fifo: [{ name: 'pipe', type: 'fifo' }],
      huge: [{ name: 'zeros', type: 'file', size: HUGE_BYTES }],
    };
    for (const [name, entries] of Object.entries(expected) as [keyof typeof expected, Partial<Header>[]][]) {
      const headers = await layerHeaders(hostile[name], 0);
      const only = (header: Header, keys: string[]) => Object.fromEntries(keys.map((key) => [key, header[key as keyof Header]]));
      assert.deepEqual(
        headers.map((header, index) => only(header, Object.keys(entries[index] ?? {}))),
        entries,
        name,
      );
    }
    assert.ok(manifestOf(hostile.huge).layers[0].size < HUGE_BYTES / 100, 'the huge layer is small to pull');
  });

  it('serves the bad-digest image a layer whose bytes do not match its digest, of the size its manifest says', async () => {
    const image = hostile['bad-digest'];
    const [layer] = manifestOf(image).layers;
    const served = Buffer.from(await (await fetch(`${open.url}/v2/${image.name}/blobs/${layer.digest}`)).arrayBuffer());
    assert.deepEqual(served, readFileSync(blobPath(image.layoutDir, layer.digest)));
    assert.equal(served.length, layer.size);
    assert.notEqual(sha256(served), layer.digest);
    assert.ok(gunzipSync(served).length > 0, 'still a valid gzip: only the digest tells');
    await assert.rejects(skopeo('copy', '--src-tls-verify=false', `docker://${registryReference(open, image)}`, `dir:${join(dir, 'copied-bad-digest')}`), /digest/);
  });

  it('pushes the multi-arch image as an index of linux/amd64 and linux/arm64, each its own image', async () => {
    const ref = `docker://${registryReference(open, multiArch)}`;
    const index = JSON.parse(await skopeo('inspect', '--raw', '--tls-verify=false', ref));
    assert.equal(index.mediaType, MEDIA_TYPES.index);
    assert.deepEqual(
      index.manifests.map((manifest: any) => `${manifest.platform.os}/${manifest.platform.architecture}`),
      ['linux/amd64', 'linux/arm64'],
    );
    const [amd64, arm64] = await Promise.all(['amd64', 'arm64'].map(async (arch) => JSON.parse(await skopeo('--override-arch', arch, 'inspect', '--tls-verify=false', ref))));
    assert.equal(amd64.Architecture, 'amd64');
    assert.equal(arm64.Architecture, 'arm64');
    assert.notDeepEqual(amd64.Layers, arm64.Layers);
  });

  it('builds a python image that runs python3 and has no bash', () => {
    const root = unpack(python);
    assert.equal(chroot(root, ...PYTHON_CHECK), '1\n');
    assert.equal(lstatSync(join(root, 'bin', 'bash'), { throwIfNoEntry: false }), undefined);
  });

  for (const [auth, challenge] of [
    ['basic', /^Basic realm="[^"]+"$/],
    ['token', /^Bearer realm="http:\/\/127\.0\.0\.1:\d+\/token",service="[^"]+",scope="repository:agent-runner-test\/busybox:pull"$/],
  ] as const) {
    it(`refuses anonymous pulls from the registry with ${auth} auth, with a ${auth === 'basic' ? 'Basic' : 'Bearer'} challenge, and serves with its credentials`, async () => {
      const registry = auth === 'basic' ? basic : token;
      const anonymous = await fetch(`${registry.url}/v2/${busybox.name}/manifests/${busybox.tag}`, { headers: { accept: ACCEPT } });
      assert.equal(anonymous.status, 401);
      assert.match(anonymous.headers.get('www-authenticate') ?? '', challenge);
      const ref = `docker://${registryReference(registry, busybox)}`;
      await assert.rejects(skopeo('inspect', '--tls-verify=false', ref), /unauthorized|authentication required/i);
      await assert.rejects(skopeo('inspect', '--tls-verify=false', '--creds', `${registry.credentials!.username}:wrong`, ref), /unauthorized|authentication required/i);
      const inspected = JSON.parse(await skopeo('inspect', '--tls-verify=false', '--creds', skopeoCreds(registry)!, ref));
      assert.equal(inspected.Digest, busybox.digest);
    });
  }

  it('issues bearer tokens only for the right credentials, which the registry then accepts', async () => {
    const manifest = `${token.url}/v2/${busybox.name}/manifests/${busybox.tag}`;
    const realm = /realm="([^"]+)"/.exec((await fetch(manifest)).headers.get('www-authenticate') ?? '')![1]!;
    const tokenUrl = `${realm}?service=agent-runner-test-registry&scope=repository:${busybox.name}:pull`;
    const basicAuth = (password: string) => `Basic ${Buffer.from(`${token.credentials!.username}:${password}`).toString('base64')}`;
    assert.equal((await fetch(tokenUrl)).status, 401);
    assert.equal((await fetch(tokenUrl, { headers: { authorization: basicAuth('wrong') } })).status, 401);
    const issued = await fetch(tokenUrl, { headers: { authorization: basicAuth(token.credentials!.password) } });
    assert.equal(issued.status, 200);
    const { token: jwt } = (await issued.json()) as { token: string };
    const pulled = await fetch(manifest, { headers: { accept: ACCEPT, authorization: `Bearer ${jwt}` } });
    assert.equal(pulled.status, 200);
    assert.equal(pulled.headers.get('docker-content-digest'), busybox.digest);
    // The token grants pull on this repository only: another one's manifest is refused.
    const other = await fetch(`${token.url}/v2/${layered.name}/manifests/${layered.tag}`, { headers: { accept: ACCEPT, authorization: `Bearer ${jwt}` } });
    assert.equal(other.status, 401);
  });

  it('writes the busybox image as a docker save archive and as an OCI layout tar, both readable by skopeo', async () => {
    const docker = join(dir, 'busybox-docker.tar');
    await dockerArchive(busybox, docker);
    const names = execFileSync('tar', ['-tf', docker], { encoding: 'utf8' }).split('\n');
    assert.ok(names.includes('manifest.json') && names.includes('repositories') && names.some((name) => name.endsWith('/layer.tar')), names.join(' '));
    const fromDocker = JSON.parse(await skopeo('inspect', `docker-archive:${docker}`));
    assert.equal(fromDocker.Architecture, 'amd64');
    assert.equal(fromDocker.Layers.length, 1);
    const oci = join(dir, 'busybox-oci.tar');
    ociArchive(busybox, oci);
    assert.equal(JSON.parse(await skopeo('inspect', `oci-archive:${oci}:${busybox.tag}`)).Digest, busybox.digest);
  });

  /** The image unpacked by umoci into a bundle under the test's dir; its root file system. */
  function unpack(image: OciImage): string {
    const bundle = join(dir, `bundle-${image.name.split('/')[1]}`);
    execFileSync('umoci', ['unpack', '--image', `${image.layoutDir}:${image.tag}`, bundle], { stdio: 'pipe' });
    return join(bundle, 'rootfs');
  }
});

function readBlobJson(image: OciImage, digest: string): any {
  return JSON.parse(readFileSync(blobPath(image.layoutDir, digest), 'utf8'));
}

function manifestOf(image: OciImage): any {
  return readBlobJson(image, image.digest);
}

function configOf(image: OciImage): any {
  return readBlobJson(image, manifestOf(image).config.digest);
}

/** The tar headers of the image's layer `index`, as its layout holds it. */
async function layerHeaders(image: OciImage, index: number): Promise<Header[]> {
  const archive = extract();
  archive.end(gunzipSync(readFileSync(blobPath(image.layoutDir, manifestOf(image).layers[index].digest))));
  const headers: Header[] = [];
  for await (const entry of archive) {
    headers.push(entry.header);
    entry.resume();
  }
  return headers;
}

function chroot(root: string, ...command: string[]): string {
  return execFileSync('/usr/sbin/chroot', [root, ...command], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
}
